//! Sampling fields: ranges, defaults, numbers as clients write them, `response_format`.

use serde_json::json;

use super::*;

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
    let unsupported =
        with(json!({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}));
    match chat(json!({ "response_format": unsupported })) {
        Err(ApiError::InvalidRequest { param, message, .. }) => {
            assert_eq!(param.as_deref(), Some("response_format"));
            assert!(message.contains("\"multipleOf\""), "{message}");
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
fn best_of_must_equal_n() {
    assert!(completion(json!({"best_of": 2, "n": 2})).is_ok());
    assert_eq!(
        rejected_param(completion(json!({"best_of": 3, "n": 1}))),
        "best_of"
    );
}
