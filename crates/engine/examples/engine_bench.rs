//! Decode throughput of the real engine at several concurrency levels, and the share of each
//! step spent outside the model (scheduling, sampling, detokenizing).
//!
//! ```sh
//! python3 bench/make_random_model.py bench/out/models          # random Qwen2.5-0.5B shapes
//! cargo run --release -p sluice-engine --example engine_bench -- \
//!     bench/out/models/qwen2.5-0.5b f16 1,4,16,64 128 64
//! ```
//! Arguments: model dir, weight dtype (f32|f16), concurrency levels, prompt tokens, output tokens.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sluice_engine::{Engine, EngineConfig, Event, GenerationRequest, ModelExecutor};
use sluice_model::{KvCache, KvDtype, LoadOptions, Model, WeightDtype};
use sluice_text::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .ok_or("usage: engine_bench DIR [f32|f16] [LEVELS] [PROMPT] [OUTPUT]")?,
    );
    let dtype = match args.get(1).map(String::as_str).unwrap_or("f16") {
        "f32" => WeightDtype::F32,
        "f16" => WeightDtype::F16,
        other => return Err(format!("unknown dtype {other}").into()),
    };
    let levels: Vec<usize> = args
        .get(2)
        .map(String::as_str)
        .unwrap_or("1,4,16,64")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let prompt_len: usize = args.get(3).map_or(Ok(128), |s| s.parse())?;
    let output_len: u32 = args.get(4).map_or(Ok(64), |s| s.parse())?;

    let model = Model::load(&dir, &LoadOptions { dtype: Some(dtype) })?;
    let config = model.config().clone();
    let tokenizer = Arc::new(Tokenizer::from_dir(&dir)?);
    let max_seqs = *levels.iter().max().unwrap_or(&1);
    // The KV cache follows the weights, as `sluice serve --kv-cache-dtype auto` does.
    let kv_dtype = KvDtype::from(dtype);
    let kv = KvCache::new(
        &config,
        kv_dtype,
        16,
        max_seqs * (prompt_len + output_len as usize) / 16 + max_seqs * 2,
    );
    let engine = Engine::start(
        Box::new(ModelExecutor::new(model, kv)),
        tokenizer,
        EngineConfig {
            max_num_seqs: max_seqs,
            max_num_batched_tokens: 512,
            max_model_len: config.max_position_embeddings,
            eos_token_ids: config.eos_token_ids.clone(),
            ..EngineConfig::default()
        },
    );
    println!("| concurrency | output tok/s | decode tok/s (sum of per-stream rates) | wall s | steps | schedule % | forward % | sample % |");
    println!("|---|---|---|---|---|---|---|---|");
    for (round, &c) in levels.iter().enumerate() {
        let before = engine.metrics().step_times();
        let started = Instant::now();
        let mut streams = Vec::new();
        for i in 0..c {
            // Distinct prompts so the prefix cache cannot share work between requests.
            let prompt: Vec<u32> = (0..prompt_len)
                .map(|j| {
                    ((round * 7919 + i * 104_729 + j * 31) % (config.vocab_size - 1)) as u32 + 1
                })
                .collect();
            streams.push(engine.submit(GenerationRequest::greedy(prompt, output_len))?);
        }
        // One reader thread per stream, so each token is timed when it arrives.
        let readers: Vec<_> = streams
            .into_iter()
            .map(|mut stream| {
                std::thread::spawn(move || {
                    let (mut tokens, mut first, mut last) = (0usize, None, None);
                    while let Some(event) = stream.blocking_recv() {
                        match event {
                            Event::Delta { token_ids, .. } if !token_ids.is_empty() => {
                                let now = Instant::now();
                                first.get_or_insert(now);
                                last = Some(now);
                                tokens += token_ids.len();
                            }
                            Event::Delta { .. }
                            | Event::Prompt { .. }
                            | Event::Scheduled { .. } => {}
                            Event::Finished { .. } => break,
                        }
                    }
                    (tokens, first, last)
                })
            })
            .collect();
        let mut generated = 0usize;
        let mut decode_rate = 0.0;
        for reader in readers {
            let (tokens, first, last) = reader.join().map_err(|_| "reader panicked")?;
            generated += tokens;
            if let (Some(first), Some(last)) = (first, last) {
                let secs = last.duration_since(first).as_secs_f64();
                if secs > 0.0 {
                    decode_rate += (tokens - 1) as f64 / secs;
                }
            }
        }
        let wall = started.elapsed().as_secs_f64();
        let after = engine.metrics().step_times();
        let schedule = after.schedule_seconds - before.schedule_seconds;
        let forward = after.forward_seconds - before.forward_seconds;
        let sample = after.sample_seconds - before.sample_seconds;
        let total = (schedule + forward + sample).max(1e-9);
        println!(
            "| {c} | {:.1} | {:.1} | {wall:.2} | {} | {:.2} | {:.1} | {:.2} |",
            generated as f64 / wall,
            decode_rate,
            after.steps - before.steps,
            100.0 * schedule / total,
            100.0 * forward / total,
            100.0 * sample / total,
        );
    }
    engine.shutdown();
    Ok(())
}
