//! Prompts against the context: forms, lengths, `max_tokens` defaults, fields carried into the request.

use serde_json::json;

use super::*;

#[test]
fn max_tokens_defaults_to_the_rest_of_the_context() {
    let v = chat(json!({})).unwrap();
    let req = v
        .params
        .request_for(vec![1; 10], 64, "messages", false)
        .unwrap();
    assert_eq!(req.stop.max_tokens, 54);
    assert_eq!(req.prompt_tokens.len(), 10);
}

#[test]
fn prompt_plus_max_tokens_beyond_context_names_both_numbers() {
    let v = chat(json!({"max_tokens": 60})).unwrap();
    let err = v
        .params
        .request_for(vec![1; 10], 64, "messages", false)
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("64"), "{message}");
    assert!(message.contains("10"), "{message}");
    assert!(message.contains("60"), "{message}");
    assert_eq!(
        err.body().error.code.as_deref(),
        Some("context_length_exceeded")
    );
    assert!(matches!(
        err,
        ApiError::ContextLengthExceeded {
            prompt_tokens: 10,
            max_tokens: Some(60),
            context: 64,
            ..
        }
    ));
    assert!(v
        .params
        .request_for(vec![1; 4], 64, "messages", false)
        .is_ok());
    // `--clamp-max-tokens`: cut to the 54 tokens left.
    let clamped = v
        .params
        .request_for(vec![1; 10], 64, "messages", true)
        .unwrap();
    assert_eq!(clamped.stop.max_tokens, 54);
}

#[test]
fn prompt_filling_the_context_is_rejected() {
    let v = chat(json!({})).unwrap();
    let err = v
        .params
        .request_for(vec![1; 64], 64, "prompt", false)
        .unwrap_err();
    assert!(err.to_string().contains("64"));
    assert_eq!(
        rejected_param(v.params.request_for(vec![], 64, "prompt", false)),
        "prompt"
    );
}

#[test]
fn request_carries_every_validated_field() {
    let v = chat(json!({"n": 2, "max_tokens": 5, "temperature": 0.3, "seed": 7, "stop": "x", "priority": "low"})).unwrap();
    let req = v
        .params
        .request_for(vec![1, 2, 3], 64, "messages", false)
        .unwrap();
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
