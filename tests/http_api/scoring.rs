//! Scoring over HTTP: prompt logprobs through `/v1/completions` (`echo` + `logprobs`, also
//! with `max_tokens: 0`), `/v1/embeddings`, `/v1/rerank`, `/rerank` and `/v1/score`, each checked
//! against the transformers references `scripts/make_fixtures.py` wrote.

use serde_json::{json, Value};

use crate::server::post_json as post;
use crate::server::{fixture, model_dir, start, ServerOptions, MODEL_ID};

fn reference(fixture: &str, file: &str) -> Value {
    let path = model_dir().join("..").join(fixture).join(file);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    (v.as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_with_logprobs_scores_every_prompt_token_like_transformers() {
    let server = start(ServerOptions::default()).await;
    let r = reference("llama", "scoring_reference.json");
    let ids = r["prompt_ids"].clone();
    let want = floats(&r["prompt_logprobs"]);
    let (status, body) = post(
        &server.base,
        "/v1/completions",
        json!({"model": MODEL_ID, "prompt": [ids.clone(), ids], "echo": true, "logprobs": 2, "max_tokens": 0}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for choice in body["choices"].as_array().unwrap() {
        assert_eq!(choice["finish_reason"], "length");
        let lp = &choice["logprobs"];
        let token_logprobs = lp["token_logprobs"].as_array().unwrap();
        assert_eq!(
            token_logprobs.len(),
            want.len() + 1,
            "one entry per prompt token"
        );
        assert!(
            token_logprobs[0].is_null(),
            "the first token has no context"
        );
        assert!(lp["top_logprobs"][0].is_null());
        for (got, want) in token_logprobs[1..].iter().zip(&want) {
            assert!((got.as_f64().unwrap() as f32 - want).abs() < 1e-3);
        }
        assert_eq!(lp["top_logprobs"][1].as_object().unwrap().len(), 2);
        // Offsets run over the echoed text, token by token.
        let tokens: Vec<&str> = (lp["tokens"].as_array().unwrap().iter())
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(lp["text_offset"][1], tokens[0].chars().count());
    }
    assert_eq!(body["usage"]["completion_tokens"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_with_logprobs_and_a_generated_token_appends_its_entry() {
    let server = start(ServerOptions::default()).await;
    let body = json!({"model": MODEL_ID, "prompt": "Let there be light", "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0, "ignore_eos": true});
    let (status, scored) = post(&server.base, "/v1/completions", body).await;
    assert_eq!(status, 200, "{scored}");
    let prompt_tokens = scored["usage"]["prompt_tokens"].as_u64().unwrap() as usize;
    let lp = &scored["choices"][0]["logprobs"];
    assert_eq!(lp["tokens"].as_array().unwrap().len(), prompt_tokens + 1);
    assert!(lp["token_logprobs"][prompt_tokens].is_number());
    let text = scored["choices"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Let there be light"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_pool_as_the_sentence_transformers_config_says() {
    let server = start(fixture("qwen3-embedder")).await;
    let r = reference("qwen3-embedder", "embedding_reference.json");
    let inputs = r["inputs"].as_array().unwrap();
    let texts: Vec<&str> = inputs.iter().map(|i| i["text"].as_str().unwrap()).collect();
    let (status, body) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": texts}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
    let tokens: usize = inputs
        .iter()
        .map(|i| i["ids"].as_array().unwrap().len())
        .sum();
    assert_eq!(body["usage"]["prompt_tokens"], tokens);
    for (data, input) in body["data"].as_array().unwrap().iter().zip(inputs) {
        assert_eq!(data["object"], "embedding");
        let (got, want) = (floats(&data["embedding"]), floats(&input["embedding"]));
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "embedding differs by {worst}");
    }
    // Token ids embed the same, and base64 carries the same floats.
    let ids = inputs[0]["ids"].clone();
    let (_, by_ids) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": ids, "encoding_format": "base64"}),
    )
    .await;
    let encoded = by_ids["data"][0]["embedding"].as_str().unwrap();
    let decoded = base64_floats(encoded);
    assert_eq!(decoded, floats(&body["data"][0]["embedding"]));
}

/// Decodes standard padded base64 of little-endian f32s.
fn base64_floats(s: &str) -> Vec<f32> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let mut bytes = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let n = (chunk.iter().filter(|&&c| c != b'='))
            .fold(0u32, |n, &c| (n << 6) | u32::from(value(c)))
            << (6 * pad);
        bytes.extend(&n.to_be_bytes()[1..4 - pad]);
    }
    (bytes.chunks(4))
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_dimensions_truncate_and_renormalise_and_long_inputs_are_refused() {
    let server = start(ServerOptions::default()).await;
    let embed = |extra: Value| {
        let mut body = json!({"model": MODEL_ID, "input": "In the beginning"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        post(&server.base, "/v1/embeddings", body)
    };
    let (status, full) = embed(json!({})).await;
    assert_eq!(status, 200, "{full}");
    let full = floats(&full["data"][0]["embedding"]);
    let (_, short) = embed(json!({"dimensions": 8})).await;
    let short = floats(&short["data"][0]["embedding"]);
    assert_eq!(short.len(), 8);
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm(&short) - 1.0).abs() < 1e-5);
    let scale = norm(&full[..8]);
    for (s, f) in short.iter().zip(&full) {
        assert!((s * scale - f).abs() < 1e-5);
    }
    let (status, body) = embed(json!({"dimensions": 100_000})).await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("dimensions"))
    );
    let long = "light ".repeat(server.max_model_len);
    let (status, body) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": long}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let (status, _) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": long, "truncate_prompt_tokens": 16}),
    )
    .await;
    assert_eq!(status, 200); // Four embedding requests ran (the refused ones never reached the engine).
    let series = |task: &str| {
        format!("vllm:request_success_total{{model_name=\"{MODEL_ID}\",task=\"{task}\"}}")
    };
    assert_eq!(
        crate::metrics::scrape(&server.base, &series("embed")).await,
        4.0
    );
    assert_eq!(
        crate::metrics::scrape(&server.base, &series("generate")).await,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yes_no_reranker_ranks_by_the_reference_relevance() {
    let server = start(fixture("qwen3-reranker")).await;
    let r = reference("qwen3-reranker", "rerank_reference.json");
    let results = r["results"].as_array().unwrap();
    let documents: Vec<&str> = results
        .iter()
        .map(|d| d["document"].as_str().unwrap())
        .collect();
    let want: Vec<f64> = results
        .iter()
        .map(|d| d["relevance"].as_f64().unwrap())
        .collect();
    for path in ["/v1/rerank", "/rerank"] {
        let (status, body) = post(
            &server.base,
            path,
            json!({"model": MODEL_ID, "query": r["query"], "documents": documents}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let got = body["results"].as_array().unwrap();
        assert_eq!(got.len(), documents.len());
        assert!(got[0]["relevance_score"].as_f64() >= got[1]["relevance_score"].as_f64());
        for result in got {
            let index = result["index"].as_u64().unwrap() as usize;
            let score = result["relevance_score"].as_f64().unwrap();
            assert!(
                (score - want[index]).abs() < 1e-3 * want[index] + 1e-6,
                "{score} vs {}",
                want[index]
            );
            assert_eq!(result["document"]["text"], documents[index]);
        }
    }
    let (_, top) = post(&server.base, "/v1/rerank", json!({"model": MODEL_ID, "query": r["query"], "documents": documents, "top_n": 1, "return_documents": false})).await;
    assert_eq!(top["results"].as_array().unwrap().len(), 1);
    assert!(top["results"][0].get("document").is_none());
    let (status, score) = post(
        &server.base,
        "/v1/score",
        json!({"model": MODEL_ID, "text_1": r["query"], "text_2": documents}),
    )
    .await;
    assert_eq!(status, 200, "{score}");
    for (data, want) in score["data"].as_array().unwrap().iter().zip(&want) {
        assert!((data["score"].as_f64().unwrap() - want).abs() < 1e-3 * want + 1e-6);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedder_reranks_by_cosine_similarity() {
    let server = start(fixture("qwen3-embedder")).await;
    let docs = ["Rivers run to the sea.", "Numbers like 1, 2, 3."];
    let (_, embedded) = post(
        &server.base,
        "/v1/embeddings",
        json!({"model": MODEL_ID, "input": ["Where do rivers run?", docs[0], docs[1]]}),
    )
    .await;
    let vectors: Vec<Vec<f32>> = (embedded["data"].as_array().unwrap().iter())
        .map(|d| floats(&d["embedding"]))
        .collect();
    let (status, body) = post(
        &server.base,
        "/v1/score",
        json!({"model": MODEL_ID, "text_1": "Where do rivers run?", "text_2": docs}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for (i, data) in body["data"].as_array().unwrap().iter().enumerate() {
        let cosine: f32 = vectors[0]
            .iter()
            .zip(&vectors[i + 1])
            .map(|(a, b)| a * b)
            .sum();
        assert!((data["score"].as_f64().unwrap() as f32 - cosine).abs() < 1e-5);
    }
}
