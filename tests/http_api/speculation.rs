//! Speculative decoding over HTTP: a speculating server answers every request exactly as a
//! plain one does (text, logprobs, finish reason, usage; streamed and not; n = 2; stop strings),
//! counts its drafts in vLLM's metrics, and leaves alone a request that opts out.

use serde_json::{json, Value};

use sluice_engine::executor::NgramProposer;
use sluice_engine::speculation::{ProposerSpec, SpeculationConfig};

use crate::server::{post_json, post_stream, sse_payloads, start, ServerOptions, MODEL_ID};

fn speculating() -> ServerOptions {
    ServerOptions {
        speculation: Some(SpeculationConfig {
            proposer: ProposerSpec::Ngram(NgramProposer {
                min_ngram: 1,
                max_ngram: 3,
            }),
            max_draft_tokens: 5,
            adaptive: false,
        }),
        ..ServerOptions::default()
    }
}

/// What must not differ between servers: everything but ids and timestamps.
fn answer(mut body: Value) -> Value {
    for key in ["id", "created", "system_fingerprint"] {
        body.as_object_mut().unwrap().remove(key);
    }
    body
}

/// The choices' text and finish reasons of a streamed completion, in choice order.
fn streamed(sse: &str) -> Vec<(String, Option<String>)> {
    let mut choices: Vec<(String, Option<String>)> = Vec::new();
    for payload in sse_payloads(sse).iter().filter(|p| *p != "[DONE]") {
        let chunk: Value = serde_json::from_str(payload).unwrap();
        for c in chunk["choices"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            if choices.len() <= i {
                choices.resize(i + 1, Default::default());
            }
            choices[i].0 += c["text"].as_str().unwrap_or_default();
            if let Some(reason) = c["finish_reason"].as_str() {
                choices[i].1 = Some(reason.to_owned());
            }
        }
    }
    choices
}

fn requests() -> Vec<Value> {
    let prompt = "one two three four five one two three four five one two three";
    vec![
        json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 40, "temperature": 0,
               "ignore_eos": true, "logprobs": 2}),
        json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 30, "temperature": 0.9,
               "seed": 5, "n": 2, "ignore_eos": true, "logprobs": 1}),
        json!({"model": MODEL_ID, "prompt": "a b c a b c a b", "max_tokens": 30,
               "temperature": 0.7, "top_p": 0.9, "seed": 9, "frequency_penalty": 0.4}),
        json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 40, "temperature": 0,
               "ignore_eos": true, "stop": ["four"]}),
        // Constrained: drafts are checked against a copy of the regex's or grammar's state.
        json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 40, "temperature": 0,
               "guided_regex": "((one|two|three|four|five) ){3,12}"}),
        json!({"model": MODEL_ID, "prompt": prompt, "max_tokens": 40, "temperature": 0.8,
               "seed": 3, "grammar": "root ::= (\"one \" | \"two \" | \"three \")+ \"end\""}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speculating_server_answers_exactly_as_a_plain_one() {
    let plain = start(ServerOptions::default()).await;
    let spec = start(speculating()).await;
    for (i, request) in requests().into_iter().enumerate() {
        let (status, want) = post_json(&plain.base, "/v1/completions", &request).await;
        assert_eq!(status, 200, "{want}");
        let (status, got) = post_json(&spec.base, "/v1/completions", &request).await;
        assert_eq!(status, 200, "{got}");
        assert_eq!(answer(got), answer(want.clone()), "request {i}");
        // Streamed, the same text and finish reasons.
        let sse = post_stream(&spec.base, "/v1/completions", &request).await;
        let want_choices: Vec<(String, Option<String>)> = (want["choices"].as_array().unwrap())
            .iter()
            .map(|c| {
                let reason = c["finish_reason"].as_str().map(str::to_owned);
                (c["text"].as_str().unwrap().to_owned(), reason)
            })
            .collect();
        assert_eq!(streamed(&sse), want_choices, "request {i}, streamed");
    }
    // Chat too.
    let chat = json!({"model": MODEL_ID, "max_tokens": 30, "temperature": 0,
        "messages": [{"role": "user", "content": "repeat: red green blue red green blue red"}]});
    let (_, want) = post_json(&plain.base, "/v1/chat/completions", &chat).await;
    let (_, got) = post_json(&spec.base, "/v1/chat/completions", &chat).await;
    assert_eq!(answer(got), answer(want));
    let drafts = spec.metric("vllm:spec_decode_num_drafts_total").await;
    let proposed = spec.metric("vllm:spec_decode_num_draft_tokens_total").await;
    let accepted = spec
        .metric("vllm:spec_decode_num_accepted_tokens_total")
        .await;
    assert!(
        drafts > 0.0 && proposed >= drafts,
        "{drafts} drafts of {proposed} tokens"
    );
    assert!(
        accepted > 0.0 && accepted <= proposed,
        "{accepted} of {proposed} accepted"
    );
    let first = crate::metrics::scrape(
        &spec.base,
        &format!("vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name=\"{MODEL_ID}\",position=\"0\"}}"),
    )
    .await;
    assert!(first > 0.0 && first <= accepted, "{first}");
    assert_eq!(plain.metric("vllm:spec_decode_num_drafts_total").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_opts_out_is_never_speculated() {
    let spec = start(speculating()).await;
    let mut request = requests().remove(0);
    request["speculative"] = json!(false);
    let (status, body) = post_json(&spec.base, "/v1/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(spec.metric("vllm:spec_decode_num_drafts_total").await, 0.0);
    request["speculative"] = json!(true);
    let (status, again) = post_json(&spec.base, "/v1/completions", &request).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["choices"], body["choices"]);
    assert!(spec.metric("vllm:spec_decode_num_drafts_total").await > 0.0);
    request["speculative"] = json!("no");
    let (status, error) = post_json(&spec.base, "/v1/completions", &request).await;
    assert_eq!(status, 400, "{error}");
}
