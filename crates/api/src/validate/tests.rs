//! Every validation rule, one specification each.

use serde_json::json;

use super::*;
use crate::wire::chat::ChatCompletionRequest;
use crate::wire::completion::CompletionRequest;

const LIMITS: ModelLimits = ModelLimits {
    max_model_len: 64,
    vocab_size: 100,
};

fn chat(extra: serde_json::Value) -> Result<ValidChatRequest, ApiError> {
    let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let req: ChatCompletionRequest = serde_json::from_value(body).unwrap();
    validate_chat(req, LIMITS)
}

fn completion(extra: serde_json::Value) -> Result<ValidCompletionRequest, ApiError> {
    let mut body = json!({"model": "m", "prompt": "hi"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let req: CompletionRequest = serde_json::from_value(body).unwrap();
    validate_completion(req, LIMITS)
}

fn rejected_param(result: Result<impl std::fmt::Debug, ApiError>) -> String {
    match result {
        Err(ApiError::InvalidRequest { param, .. }) => param.unwrap_or_default(),
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn defaults_are_openai_defaults() {
    let v = chat(json!({})).unwrap();
    assert_eq!(v.params.n, 1);
    assert_eq!(v.params.max_tokens, None);
    assert_eq!(v.params.sampling, SamplingParams::default());
    assert_eq!(v.params.priority, Priority::Normal);
    assert_eq!(v.params.stream, None);
}

#[test]
fn temperature_outside_zero_to_two_is_rejected() {
    assert_eq!(
        rejected_param(chat(json!({"temperature": -0.1}))),
        "temperature"
    );
    assert_eq!(
        rejected_param(chat(json!({"temperature": 2.5}))),
        "temperature"
    );
    assert_eq!(
        chat(json!({"temperature": 0.0}))
            .unwrap()
            .params
            .sampling
            .temperature,
        0.0
    );
    assert_eq!(
        chat(json!({"temperature": 2.0}))
            .unwrap()
            .params
            .sampling
            .temperature,
        2.0
    );
}

#[test]
fn top_p_must_be_in_half_open_unit_interval() {
    assert_eq!(rejected_param(chat(json!({"top_p": 0.0}))), "top_p");
    assert_eq!(rejected_param(chat(json!({"top_p": 1.01}))), "top_p");
    assert_eq!(
        chat(json!({"top_p": 1.0})).unwrap().params.sampling.top_p,
        1.0
    );
}

#[test]
fn n_below_one_or_above_limit_is_rejected() {
    assert_eq!(rejected_param(chat(json!({"n": 0}))), "n");
    assert_eq!(rejected_param(completion(json!({"n": 129}))), "n");
    assert_eq!(chat(json!({"n": 3})).unwrap().params.n, 3);
}

#[test]
fn max_tokens_below_one_is_rejected_under_its_own_name() {
    assert_eq!(rejected_param(chat(json!({"max_tokens": 0}))), "max_tokens");
    assert_eq!(
        rejected_param(chat(json!({"max_completion_tokens": -1}))),
        "max_completion_tokens"
    );
    assert_eq!(
        rejected_param(completion(json!({"max_tokens": 0}))),
        "max_tokens"
    );
}

#[test]
fn max_completion_tokens_wins_over_max_tokens() {
    let v = chat(json!({"max_tokens": 5, "max_completion_tokens": 7})).unwrap();
    assert_eq!(v.params.max_tokens, Some(7));
}

#[test]
fn top_logprobs_above_twenty_or_without_logprobs_is_rejected() {
    assert_eq!(
        rejected_param(chat(json!({"logprobs": true, "top_logprobs": 21}))),
        "top_logprobs"
    );
    assert_eq!(
        rejected_param(chat(json!({"top_logprobs": 2}))),
        "top_logprobs"
    );
    assert_eq!(
        chat(json!({"logprobs": true, "top_logprobs": 20}))
            .unwrap()
            .params
            .sampling
            .logprobs,
        Some(20)
    );
    assert_eq!(
        chat(json!({"logprobs": true}))
            .unwrap()
            .params
            .sampling
            .logprobs,
        Some(0)
    );
    assert_eq!(
        chat(json!({"logprobs": false}))
            .unwrap()
            .params
            .sampling
            .logprobs,
        None
    );
}

#[test]
fn completion_logprobs_is_an_integer_up_to_twenty() {
    assert_eq!(
        completion(json!({"logprobs": 3}))
            .unwrap()
            .params
            .sampling
            .logprobs,
        Some(3)
    );
    assert_eq!(
        rejected_param(completion(json!({"logprobs": 21}))),
        "logprobs"
    );
    assert_eq!(
        rejected_param(completion(json!({"logprobs": -1}))),
        "logprobs"
    );
}

#[test]
fn stream_options_without_stream_is_rejected() {
    assert_eq!(
        rejected_param(chat(json!({"stream_options": {"include_usage": true}}))),
        "stream_options"
    );
    let v = chat(json!({"stream": true, "stream_options": {"include_usage": true}})).unwrap();
    assert_eq!(
        v.params.stream,
        Some(ValidStream {
            include_usage: true
        })
    );
    let v = chat(json!({"stream": true})).unwrap();
    assert_eq!(
        v.params.stream,
        Some(ValidStream {
            include_usage: false
        })
    );
}

#[test]
fn empty_messages_are_rejected() {
    let req: ChatCompletionRequest =
        serde_json::from_value(json!({"model": "m", "messages": []})).unwrap();
    assert_eq!(rejected_param(validate_chat(req, LIMITS)), "messages");
}

#[test]
fn unknown_role_is_rejected_and_developer_is_system() {
    let req: ChatCompletionRequest = serde_json::from_value(
        json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
    )
    .unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].role"
    );
    let req: ChatCompletionRequest = serde_json::from_value(
        json!({"model": "m", "messages": [{"role": "developer", "content": "x"}]}),
    )
    .unwrap();
    assert_eq!(
        validate_chat(req, LIMITS).unwrap().messages[0]["role"],
        "system"
    );
}

#[test]
fn text_parts_are_joined_and_other_parts_rejected() {
    let req: ChatCompletionRequest = serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "content": "42", "tool_call_id": "c1"}
    ]}))
    .unwrap();
    let v = validate_chat(req, LIMITS).unwrap();
    assert_eq!(v.messages[1]["content"], "a\nb");
    assert_eq!(v.messages[3]["tool_call_id"], "c1");
    let req: ChatCompletionRequest = serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    ]}))
    .unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].content[0].type"
    );
}

#[test]
fn message_without_content_is_rejected_unless_it_carries_tool_calls() {
    let req: ChatCompletionRequest =
        serde_json::from_value(json!({"model": "m", "messages": [{"role": "user"}]})).unwrap();
    assert_eq!(
        rejected_param(validate_chat(req, LIMITS)),
        "messages[0].content"
    );
    let req: ChatCompletionRequest = serde_json::from_value(json!({"model": "m", "messages": [
        {"role": "assistant", "tool_calls": [{"id": "c1"}]}
    ]}))
    .unwrap();
    assert_eq!(
        validate_chat(req, LIMITS).unwrap().messages[0]["content"],
        ""
    );
}

#[test]
fn penalties_are_range_checked() {
    assert_eq!(
        rejected_param(chat(json!({"presence_penalty": 2.1}))),
        "presence_penalty"
    );
    assert_eq!(
        rejected_param(chat(json!({"frequency_penalty": -2.1}))),
        "frequency_penalty"
    );
    assert_eq!(
        rejected_param(chat(json!({"repetition_penalty": 0.0}))),
        "repetition_penalty"
    );
    assert_eq!(rejected_param(chat(json!({"min_p": 1.5}))), "min_p");
    let v = chat(json!({"presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2, "min_p": 0.1}))
        .unwrap();
    assert_eq!(v.params.sampling.presence_penalty, 0.5);
    assert_eq!(v.params.sampling.frequency_penalty, -0.5);
    assert_eq!(v.params.sampling.repetition_penalty, 1.2);
    assert_eq!(v.params.sampling.min_p, 0.1);
}

#[test]
fn top_k_minus_one_or_zero_disables_and_other_negatives_are_rejected() {
    assert_eq!(
        chat(json!({"top_k": -1})).unwrap().params.sampling.top_k,
        None
    );
    assert_eq!(
        chat(json!({"top_k": 0})).unwrap().params.sampling.top_k,
        None
    );
    assert_eq!(
        chat(json!({"top_k": 40})).unwrap().params.sampling.top_k,
        Some(40)
    );
    assert_eq!(rejected_param(chat(json!({"top_k": -2}))), "top_k");
}

#[test]
fn logit_bias_keys_must_be_known_token_ids_and_values_in_range() {
    let v = chat(json!({"logit_bias": {"5": 10.0, "2": -100}})).unwrap();
    assert_eq!(v.params.sampling.logit_bias, vec![(2, -100.0), (5, 10.0)]);
    assert_eq!(
        rejected_param(chat(json!({"logit_bias": {"abc": 1}}))),
        "logit_bias"
    );
    assert_eq!(
        rejected_param(chat(json!({"logit_bias": {"100": 1}}))),
        "logit_bias"
    );
    assert_eq!(
        rejected_param(chat(json!({"logit_bias": {"1": 101}}))),
        "logit_bias"
    );
}

#[test]
fn stop_token_ids_are_checked_against_the_vocabulary() {
    assert_eq!(
        chat(json!({"stop_token_ids": [3, 4]}))
            .unwrap()
            .params
            .stop
            .stop_token_ids,
        vec![3, 4]
    );
    assert_eq!(
        rejected_param(chat(json!({"stop_token_ids": [100]}))),
        "stop_token_ids"
    );
    assert_eq!(
        rejected_param(chat(json!({"stop_token_ids": [-1]}))),
        "stop_token_ids"
    );
}

#[test]
fn stop_strings_accept_one_or_many_but_not_empty() {
    assert_eq!(
        chat(json!({"stop": "\n"}))
            .unwrap()
            .params
            .stop
            .stop_strings
            .patterns(),
        ["\n"]
    );
    assert_eq!(
        chat(json!({"stop": ["a", "b"]}))
            .unwrap()
            .params
            .stop
            .stop_strings
            .patterns(),
        ["a", "b"]
    );
    assert_eq!(rejected_param(chat(json!({"stop": [""]}))), "stop");
}

fn message_of(result: Result<impl std::fmt::Debug, ApiError>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

#[test]
fn stop_lists_are_bounded_in_count_and_length() {
    let many: Vec<String> = (0..=MAX_STOP_STRINGS).map(|i| format!("s{i}")).collect();
    let err = message_of(chat(json!({ "stop": many })));
    assert!(
        err.contains(&format!("at most {MAX_STOP_STRINGS}")),
        "{err}"
    );
    let long = "x".repeat(MAX_STOP_STRING_BYTES + 1);
    assert_eq!(rejected_param(chat(json!({ "stop": [long] }))), "stop");
    let most: Vec<String> = (0..MAX_STOP_STRINGS).map(|i| format!("s{i}")).collect();
    assert!(chat(json!({ "stop": most })).is_ok());
    let ids: Vec<u32> = (0..=MAX_STOP_TOKEN_IDS as u32).map(|i| i % 100).collect();
    let err = message_of(chat(json!({ "stop_token_ids": ids })));
    assert!(
        err.contains(&format!("at most {MAX_STOP_TOKEN_IDS}")),
        "{err}"
    );
}

#[test]
fn stop_token_ids_are_sorted_and_deduplicated_for_binary_search() {
    let params = chat(json!({"stop_token_ids": [9, 2, 9, 5]}))
        .unwrap()
        .params;
    assert_eq!(params.stop.stop_token_ids, vec![2, 5, 9]);
}

#[test]
fn integers_written_as_floats_are_accepted() {
    let params = chat(json!({"max_tokens": 11.0, "n": 2.0, "seed": 7.0}))
        .unwrap()
        .params;
    assert_eq!((params.max_tokens, params.n), (Some(11), 2));
    assert_eq!(params.sampling.seed, Some(7));
}

#[test]
fn seeds_cover_the_whole_u64_range_and_negative_i64() {
    let seed = |v: serde_json::Value| chat(json!({ "seed": v })).map(|c| c.params.sampling.seed);
    assert_eq!(seed(json!(u64::MAX)).unwrap(), Some(u64::MAX));
    assert_eq!(seed(json!(1u64 << 63)).unwrap(), Some(1u64 << 63));
    assert_eq!(seed(json!(-1)).unwrap(), Some(u64::MAX));
    assert_eq!(
        rejected_param(seed(json!(1.8446744073709552e19_f64 * 2.0))),
        "seed"
    );
}

#[test]
fn tiny_positive_top_p_and_repetition_penalty_are_not_rounded_to_zero() {
    let params = chat(json!({"top_p": 5e-324, "repetition_penalty": 5e-324}))
        .unwrap()
        .params;
    assert!(params.sampling.top_p > 0.0);
    assert!(params.sampling.repetition_penalty > 0.0);
}

#[test]
fn over_large_values_name_the_real_bound() {
    let err = message_of(chat(json!({"max_tokens": 1u64 << 40})));
    assert!(err.contains("between 1 and 4294967295"), "{err}");
    let err = message_of(chat(json!({"n": 1000})));
    assert!(err.contains("between 1 and 128"), "{err}");
    let err = message_of(chat(json!({"top_k": 1u64 << 40})));
    assert!(err.contains("between 1 and 4294967295"), "{err}");
}

#[test]
fn min_tokens_must_not_exceed_max_tokens() {
    assert_eq!(
        rejected_param(chat(json!({"min_tokens": 5, "max_tokens": 4}))),
        "min_tokens"
    );
    assert_eq!(
        rejected_param(chat(json!({"min_tokens": -1}))),
        "min_tokens"
    );
    let v = chat(json!({"min_tokens": 2, "ignore_eos": true})).unwrap();
    assert_eq!(v.params.stop.min_tokens, 2);
    assert!(v.params.stop.ignore_eos);
}

#[test]
fn priority_names_map_and_unknown_is_rejected() {
    assert_eq!(
        chat(json!({"priority": "high"})).unwrap().params.priority,
        Priority::High
    );
    assert_eq!(
        chat(json!({"priority": "low"})).unwrap().params.priority,
        Priority::Low
    );
    assert_eq!(
        rejected_param(chat(json!({"priority": "urgent"}))),
        "priority"
    );
}

#[test]
fn response_format_text_json_object_or_a_compiled_json_schema() {
    let format = |v: serde_json::Value| {
        chat(json!({ "response_format": v }))
            .unwrap()
            .params
            .sampling
            .response_format
    };
    assert_eq!(format(json!({"type": "text"})), ResponseFormat::Text);
    assert_eq!(
        format(json!({"type": "json_object"})),
        ResponseFormat::JsonObject
    );
    let on_completions = completion(json!({"response_format": {"type": "json_object"}}));
    assert_eq!(
        on_completions.unwrap().params.sampling.response_format,
        ResponseFormat::JsonObject
    );
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let with = |schema: serde_json::Value| json!({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}});
    assert!(matches!(
        format(with(schema)),
        ResponseFormat::JsonSchema(_)
    ));
    let unsupported = with(json!({"type": "object", "properties": {"a": {"pattern": "x"}}}));
    match chat(json!({ "response_format": unsupported })) {
        Err(ApiError::InvalidRequest { param, message, .. }) => {
            assert_eq!(param.as_deref(), Some("response_format"));
            assert!(message.contains("\"pattern\""), "{message}");
            assert!(message.contains("#/properties/a"), "{message}");
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    assert_eq!(
        rejected_param(chat(
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})
        )),
        "response_format"
    );
    assert_eq!(
        rejected_param(chat(json!({"response_format": {"type": "yaml"}}))),
        "response_format"
    );
}

#[test]
fn seed_is_passed_through() {
    assert_eq!(
        chat(json!({"seed": 42})).unwrap().params.sampling.seed,
        Some(42)
    );
}

#[test]
fn max_tokens_defaults_to_the_rest_of_the_context() {
    let v = chat(json!({})).unwrap();
    let req = v.params.request_for(vec![1; 10], 64, "messages").unwrap();
    assert_eq!(req.stop.max_tokens, 54);
    assert_eq!(req.prompt_tokens.len(), 10);
}

#[test]
fn prompt_plus_max_tokens_beyond_context_names_both_numbers() {
    let v = chat(json!({"max_tokens": 60})).unwrap();
    let err = v
        .params
        .request_for(vec![1; 10], 64, "messages")
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("64"), "{message}");
    assert!(message.contains("10"), "{message}");
    assert!(message.contains("60"), "{message}");
    assert!(matches!(
        err,
        ApiError::InvalidRequest {
            code: Some("context_length_exceeded"),
            ..
        }
    ));
    assert!(v.params.request_for(vec![1; 4], 64, "messages").is_ok());
}

#[test]
fn prompt_filling_the_context_is_rejected() {
    let v = chat(json!({})).unwrap();
    let err = v.params.request_for(vec![1; 64], 64, "prompt").unwrap_err();
    assert!(err.to_string().contains("64"));
    assert_eq!(
        rejected_param(v.params.request_for(vec![], 64, "prompt")),
        "prompt"
    );
}

#[test]
fn request_carries_every_validated_field() {
    let v = chat(json!({"n": 2, "max_tokens": 5, "temperature": 0.3, "seed": 7, "stop": "x", "priority": "low"})).unwrap();
    let req = v.params.request_for(vec![1, 2, 3], 64, "messages").unwrap();
    assert_eq!(req.n, 2);
    assert_eq!(req.stop.max_tokens, 5);
    assert_eq!(req.stop.stop_strings.patterns(), ["x"]);
    assert_eq!(req.sampling.temperature, 0.3);
    assert_eq!(req.sampling.seed, Some(7));
    assert_eq!(req.priority, Priority::Low);
}

#[test]
fn prompt_forms_all_parse() {
    assert_eq!(
        completion(json!({"prompt": "a"})).unwrap().prompts,
        vec![PromptInput::Text("a".into())]
    );
    assert_eq!(
        completion(json!({"prompt": ["a", "b"]})).unwrap().prompts,
        vec![PromptInput::Text("a".into()), PromptInput::Text("b".into())]
    );
    assert_eq!(
        completion(json!({"prompt": [1, 2]})).unwrap().prompts,
        vec![PromptInput::Tokens(vec![1, 2])]
    );
    assert_eq!(
        completion(json!({"prompt": [[1], [2, 3]]}))
            .unwrap()
            .prompts,
        vec![
            PromptInput::Tokens(vec![1]),
            PromptInput::Tokens(vec![2, 3])
        ]
    );
}

#[test]
fn malformed_prompts_are_rejected() {
    for bad in [
        json!(null),
        json!([]),
        json!(5),
        json!([1, "a"]),
        json!(["a", 1]),
        json!([[]]),
        json!([{"x": 1}]),
        json!([100]),
    ] {
        assert_eq!(rejected_param(completion(json!({"prompt": bad}))), "prompt");
    }
}

#[test]
fn suffix_is_rejected() {
    assert_eq!(
        rejected_param(completion(json!({"suffix": "end"}))),
        "suffix"
    );
    assert!(completion(json!({"suffix": ""})).is_ok());
}

#[test]
fn echo_with_logprobs_asks_for_prompt_logprobs_streamed_or_not() {
    assert!(completion(json!({"echo": true})).unwrap().echo);
    assert_eq!(
        completion(json!({"echo": true})).unwrap().prompt_logprobs,
        None
    );
    let scored = completion(json!({"echo": true, "logprobs": 2})).unwrap();
    assert_eq!(scored.prompt_logprobs, Some(2));
    let streamed = completion(json!({"echo": true, "logprobs": 1, "stream": true})).unwrap();
    assert_eq!(streamed.prompt_logprobs, Some(1));
}

#[test]
fn vllm_prompt_logprobs_are_bounded_and_not_streamed() {
    assert_eq!(
        completion(json!({"prompt_logprobs": 5}))
            .unwrap()
            .params
            .prompt_logprobs,
        Some(5)
    );
    assert_eq!(
        chat(json!({"prompt_logprobs": 0}))
            .unwrap()
            .params
            .prompt_logprobs,
        Some(0)
    );
    for bad in [
        json!({"prompt_logprobs": 21}),
        json!({"prompt_logprobs": -1}),
        json!({"prompt_logprobs": 1, "stream": true}),
    ] {
        assert_eq!(rejected_param(completion(bad)), "prompt_logprobs");
    }
}

#[test]
fn max_tokens_zero_scores_an_echoed_prompt_and_is_refused_otherwise() {
    let scored = completion(json!({"echo": true, "logprobs": 0, "max_tokens": 0})).unwrap();
    assert_eq!(scored.params.max_tokens, Some(0));
    assert_eq!(
        rejected_param(completion(json!({"max_tokens": 0}))),
        "max_tokens"
    );
    assert_eq!(
        rejected_param(completion(
            json!({"echo": true, "max_tokens": 0, "min_tokens": 1})
        )),
        "min_tokens"
    );
}

#[test]
fn best_of_must_equal_n() {
    assert!(completion(json!({"best_of": 2, "n": 2})).is_ok());
    assert_eq!(
        rejected_param(completion(json!({"best_of": 3, "n": 1}))),
        "best_of"
    );
}
