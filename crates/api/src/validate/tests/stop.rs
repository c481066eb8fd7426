//! Stop strings and stop token ids: forms, bounds, the vocabulary.

use serde_json::json;

use super::*;

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
