//! Logprobs: chat's `top_logprobs`, completions' integer, echoed and vLLM prompt logprobs.

use serde_json::json;

use super::*;

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
