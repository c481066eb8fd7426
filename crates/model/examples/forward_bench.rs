//! Forward-pass benchmark on random weights with real model shapes.
//!
//! ```text
//! cargo run --release -p sluice-model --example forward_bench -- [smollm2|qwen2.5|llama8b-4l|all] [f32|f16|q4_k|q8_0|...|all]
//! cargo run --release -p sluice-model --example forward_bench -- --model-dir DIR [f32|f16]
//! cargo run --release -p sluice-model --example forward_bench -- --model-dir FILE.gguf  (as stored)
//! cargo run --release -p sluice-model --example forward_bench -- matmul [M,N,K ...]
//! cargo run --release -p sluice-model --example forward_bench -- formats [f32,f16,q4_k,...]
//! cargo run --release -p sluice-model --example forward_bench -- bandwidth
//! ```
//!
//! Prints the time (fastest wall clock, and mean process CPU time) of one decode step with 1, 16 and 64 sequences (each with a 128-token
//! history) and prefill throughput for one 512-token prompt. With `--features candle-compare` it
//! also times candle-core's matmul on the largest projection for reference.

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_gguf::GgmlType;

use sluice_model::config::WeightCapacity;
use sluice_model::{
    Batch, KvCache, KvDtype, LoadOptions, Model, ModelConfig, TensorSource, WeightDtype,
};

mod common;
use common::{process_cpu_time, RandomWeights};

fn shape_config(name: &str) -> ModelConfig {
    let json = match name {
        "smollm2" => {
            r#"{"architectures": ["LlamaForCausalLM"], "vocab_size": 49152, "hidden_size": 576,
            "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
            "num_key_value_heads": 3, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
            "rope_theta": 100000.0, "tie_word_embeddings": true}"#
        }
        "qwen2.5" => {
            r#"{"architectures": ["Qwen2ForCausalLM"], "vocab_size": 151936, "hidden_size": 896,
            "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
            "num_key_value_heads": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": true}"#
        }
        // Llama-3-8B's layer shapes (4 of its 32 layers, a 32,000-token vocabulary): per-layer
        // prefill and decode cost of an 8B model in seconds of set-up.
        "llama8b-4l" => {
            r#"{"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 4, "num_attention_heads": 32,
            "num_key_value_heads": 8, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0, "tie_word_embeddings": false}"#
        }
        other => panic!("unknown shape `{other}` (smollm2 | qwen2.5 | llama8b-4l)"),
    };
    // The made-up f32 weights of either shape take under 4 GiB.
    ModelConfig::from_json_for(json, WeightCapacity::of_bytes(4 << 30)).expect("valid config")
}

/// One measurement: the fastest of `runs` wall-clock timings (the machine is shared, so the
/// minimum is the best estimate of an undisturbed run) and the mean CPU time per run.
struct Timing {
    wall: Duration,
    cpu: Option<Duration>,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>8.2} ms wall", self.wall.as_secs_f64() * 1e3)?;
        if let Some(cpu) = self.cpu {
            write!(f, " ({:>8.2} ms cpu)", cpu.as_secs_f64() * 1e3)?;
        }
        Ok(())
    }
}

fn measure(runs: usize, mut f: impl FnMut()) -> Timing {
    let cpu_start = process_cpu_time();
    let wall = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .expect("at least one run");
    let cpu = cpu_start
        .zip(process_cpu_time())
        .map(|(a, b)| (b - a) / runs as u32);
    Timing { wall, cpu }
}

/// `FORWARD_BENCH_KV=f32|f16|bf16` sets the KV cache's type; else `default`.
fn kv_dtype_or(default: KvDtype) -> KvDtype {
    match std::env::var("FORWARD_BENCH_KV").ok().as_deref() {
        None => default,
        Some("f32") => KvDtype::F32,
        Some("f16") => KvDtype::F16,
        Some("bf16") => KvDtype::Bf16,
        Some(other) => panic!("FORWARD_BENCH_KV={other}: f32, f16 or bf16"),
    }
}

fn bench(label: &str, model: &Model, kv_dtype: KvDtype) {
    const BLOCK: usize = 16;
    let kv_dtype = kv_dtype_or(kv_dtype);
    let label = &format!("{label}, {kv_dtype:?} KV");
    const HISTORY: usize = 128;
    // FORWARD_BENCH_PROMPT sets the prefill prompt's length (512 by default).
    let prompt_len: usize = std::env::var("FORWARD_BENCH_PROMPT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(512);
    let vocab = model.config().vocab_size as u32;
    let blocks_per_seq = (HISTORY + 1).div_ceil(BLOCK);
    let mut kv = KvCache::new(
        model.config(),
        kv_dtype,
        BLOCK,
        64 * blocks_per_seq + prompt_len.div_ceil(BLOCK),
    );
    let table = |s: usize| -> Vec<u32> {
        (0..blocks_per_seq)
            .map(|b| (s * blocks_per_seq + b) as u32)
            .collect()
    };
    // Fill 64 sequences' histories (one prefill batch each of 8 sequences).
    for group in 0..8 {
        let mut batch = Batch::default();
        for s in group * 8..group * 8 + 8 {
            let tokens: Vec<u32> = (0..HISTORY)
                .map(|i| ((s * 131 + i * 7) as u32) % vocab)
                .collect();
            batch.push_sequence(&tokens, 0, table(s), BLOCK, false);
        }
        model.forward(&batch, &mut kv).expect("history prefill");
    }
    println!(
        "{label}: weights {:.0} MiB",
        model.weight_bytes() as f64 / (1 << 20) as f64
    );
    // FORWARD_BENCH_ONLY=decode1|decode16|decode64|prefill runs one case, FORWARD_BENCH_REPEAT
    // times as often (for profilers).
    let only = std::env::var("FORWARD_BENCH_ONLY").ok();
    let repeat: usize = std::env::var("FORWARD_BENCH_REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let wanted = |case: &str| only.as_deref().is_none_or(|o| o == case);
    for seqs in [1usize, 16, 64] {
        if !wanted(&format!("decode{seqs}")) {
            continue;
        }
        let mut batch = Batch::default();
        for s in 0..seqs {
            batch.push_sequence(&[(s as u32 * 17) % vocab], HISTORY, table(s), BLOCK, true);
        }
        let runs = repeat * if seqs == 64 { 5 } else { 9 };
        let t = measure(runs, || {
            model.forward(&batch, &mut kv).expect("decode");
        });
        // Mixtures of experts: how many distinct experts the step ran, summed over its layers.
        let experts = (model.experts_touched_last_step())
            .map(|n| format!(", {n} experts touched over all layers"))
            .unwrap_or_default();
        println!(
            "  decode {seqs:>2} seqs: {t} per step, {:>8.1} tok/s{experts}",
            seqs as f64 / t.wall.as_secs_f64()
        );
    }
    // A step as the server runs it under load: 16 decodes beside one prompt chunk of
    // FORWARD_BENCH_CHUNK tokens (default 64), the chunk's first token at position
    // FORWARD_BENCH_CHUNK_AT (default 0: a prompt's first chunk; deeper, the chunk attends to
    // that many earlier positions, as a long prompt's later chunks do).
    if wanted("mixed") {
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
        };
        let chunk = env("FORWARD_BENCH_CHUNK").unwrap_or(64).min(prompt_len);
        let at = env("FORWARD_BENCH_CHUNK_AT")
            .unwrap_or(0)
            .min(prompt_len - chunk);
        let mut batch = Batch::default();
        for s in 0..16 {
            batch.push_sequence(&[(s as u32 * 17) % vocab], HISTORY, table(s), BLOCK, true);
        }
        let chunk_blocks: Vec<u32> = (0..(at + chunk).div_ceil(BLOCK))
            .map(|b| (64 * blocks_per_seq + b) as u32)
            .collect();
        let tokens: Vec<u32> = (0..chunk).map(|i| ((at + i) as u32 * 31) % vocab).collect();
        batch.push_sequence(&tokens, at, chunk_blocks, BLOCK, false);
        let t = measure(repeat * 5, || {
            model.forward(&batch, &mut kv).expect("mixed");
        });
        println!("  16 decodes + {chunk}-token prompt chunk at position {at}: {t} per step");
    }
    if !wanted("prefill") {
        return;
    }
    let prompt_blocks: Vec<u32> = (0..prompt_len.div_ceil(BLOCK))
        .map(|b| (64 * blocks_per_seq + b) as u32)
        .collect();
    let tokens: Vec<u32> = (0..prompt_len).map(|i| (i as u32 * 31) % vocab).collect();
    let mut batch = Batch::default();
    batch.push_sequence(&tokens, 0, prompt_blocks.clone(), BLOCK, true);
    let t = measure(2 * repeat, || {
        model.forward(&batch, &mut kv).expect("prefill");
    });
    println!(
        "  prefill {prompt_len} tokens: {t}, {:>8.1} tok/s",
        prompt_len as f64 / t.wall.as_secs_f64()
    );
    // The same prompt as the server runs it: chunks of its default step budget (256 tokens),
    // the second attending to the first's keys.
    const CHUNK: usize = 256;
    let t = measure(2 * repeat, || {
        for start in (0..prompt_len).step_by(CHUNK) {
            let mut batch = Batch::default();
            let end = (start + CHUNK).min(prompt_len);
            let last = end == prompt_len;
            batch.push_sequence(
                &tokens[start..end],
                start,
                prompt_blocks[..end.div_ceil(BLOCK)].to_vec(),
                BLOCK,
                last,
            );
            model.forward(&batch, &mut kv).expect("chunked prefill");
        }
    });
    println!(
        "  prefill {prompt_len} tokens in {CHUNK}-token chunks: {t}, {:>8.1} tok/s",
        prompt_len as f64 / t.wall.as_secs_f64()
    );
}

#[cfg(feature = "candle-compare")]
fn candle_matmul(m: usize, n: usize, k: usize) {
    use candle_core::{DType, Device, Tensor};
    let dev = Device::Cpu;
    for dtype in [DType::F32, DType::F16] {
        let x = Tensor::randn(0f32, 1.0, (m, k), &dev)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let w = Tensor::randn(0f32, 1.0, (n, k), &dev)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let wt = w.t().unwrap();
        let t = measure(5, || {
            x.matmul(&wt).unwrap();
        });
        println!(
            "  candle {dtype:?} matmul [{m}x{k}]·[{k}x{n}]: {t}, {:.1} GFLOP/s",
            2.0 * (m * n * k) as f64 / t.wall.as_secs_f64() / 1e9
        );
    }
}

fn ours_matmul(m: usize, n: usize, k: usize) {
    use sluice_model::kernels::matmul::PackedMatrix;
    let source = RandomWeights::DECODER;
    let w = source.tensor("w", &[n, k]).unwrap();
    let x = source.tensor("x", &[m, k]).unwrap();
    for dtype in [WeightDtype::F32, WeightDtype::F16] {
        let packed = PackedMatrix::pack(&w, n, k, dtype);
        let mut y = vec![0f32; m * n];
        let t = measure(5, || packed.matmul(&x, m, &mut y));
        println!(
            "  sluice {dtype:?} matmul [{m}x{k}]·[{k}x{n}]: {t}, {:.1} GFLOP/s",
            2.0 * (m * n * k) as f64 / t.wall.as_secs_f64() / 1e9
        );
    }
}

/// The weight formats `formats` times by default.
const FORMAT_TYPES: [GgmlType; 12] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::Q4_0,
    GgmlType::Q5_1,
    GgmlType::Q4_1,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q5_K,
    GgmlType::Q3_K,
    GgmlType::Q2_K,
];

/// Kernel micro-benchmark: GOP/s (2·m·n·k per product, activation preparation included) of
/// every format on Qwen2.5-0.5B's MLP shapes at m = 1, 16, 32, 64, 256, 512. K-quant types need rows of
/// whole 256-weight super-blocks, so for them 4864x896 is replaced by 4864x1024. The formats
/// take turns (one product each, round after round) and each keeps its fastest product, so a
/// noisy neighbour on the shared host slows them alike.
fn bench_formats(types: &[GgmlType]) {
    const ROWS: [usize; 6] = [1, 16, 32, 64, 256, 512];
    use sluice_model::kernels::matmul::PackedMatrix;
    let source = RandomWeights::DECODER;
    for (n, k) in [(896, 4864), (4864, 896), (4864, 1024)] {
        let w = source.tensor("w", &[n, k]).unwrap();
        let x = source.tensor("x", &[512, k]).unwrap();
        let mut packed = Vec::new();
        for &ty in types {
            let (elems, _) = ty.block().expect("known type");
            if !k.is_multiple_of(elems) || (k == 1024 && elems == 1) {
                continue;
            }
            let dtype = WeightDtype::of(ty).unwrap_or_else(|| panic!("no format for {ty}"));
            let start = Instant::now();
            let matrix = PackedMatrix::pack(&w, n, k, dtype);
            packed.push((ty, matrix, start.elapsed()));
        }
        let mut gops = vec![Vec::new(); packed.len()];
        for m in ROWS {
            let mut y = vec![0f32; m * n];
            let mut fastest = vec![Duration::MAX; packed.len()];
            let rounds = if m >= 256 { 8 } else { 40 };
            for _ in 0..rounds {
                for ((_, matrix, _), best) in packed.iter().zip(&mut fastest) {
                    let start = Instant::now();
                    matrix.matmul(&x[..m * k], m, &mut y);
                    *best = (*best).min(start.elapsed());
                }
            }
            for (g, best) in gops.iter_mut().zip(fastest) {
                g.push(2.0 * (m * n * k) as f64 / best.as_secs_f64() / 1e9);
            }
        }
        for ((ty, matrix, pack), g) in packed.iter().zip(gops) {
            let bytes_per_weight = matrix.bytes() as f64 / (n * k) as f64;
            let rates: String = ROWS
                .iter()
                .zip(&g)
                .map(|(m, g)| format!("  m={m} {g:6.1}"))
                .collect();
            println!(
                "  {n}x{k} {:<5} {bytes_per_weight:.4} B/w:{rates} GOP/s (quantize+pack {:.0} ms, {})",
                ty.name(),
                pack.as_secs_f64() * 1e3,
                sluice_model::kernels::Isa::current().name(),
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dtypes = |arg: Option<&String>| match arg.map(String::as_str) {
        Some("f32") => vec![WeightDtype::F32],
        Some("f16") => vec![WeightDtype::F16],
        Some("all") | None => vec![WeightDtype::F32, WeightDtype::F16],
        // Any quantized type by llama.cpp's name (`q4_k`, `q8_0`): random weights quantized.
        Some(name) => {
            vec![WeightDtype::from_name(name).unwrap_or_else(|| panic!("unknown dtype {name}"))]
        }
    };
    println!("rayon threads: {}", rayon::current_num_threads());
    if args.first().map(String::as_str) == Some("--model-dir") {
        let dir = Path::new(args.get(1).expect("--model-dir DIR"));
        if dir.extension().is_some_and(|e| e == "gguf") && args.get(2).is_none() {
            // A GGUF file's weights as stored (quantized types stay quantized), f16 KV.
            let model = Model::load(dir, &LoadOptions { dtype: None }).expect("load");
            bench(
                &format!("{} as stored", dir.display()),
                &model,
                KvDtype::F16,
            );
            return;
        }
        for dtype in dtypes(args.get(2)) {
            let model = Model::load(dir, &LoadOptions { dtype: Some(dtype) }).expect("load");
            bench(
                &format!("{} {dtype:?}", dir.display()),
                &model,
                KvDtype::from(dtype),
            );
        }
        return;
    }
    if args.first().map(String::as_str) == Some("formats") {
        let types: Vec<GgmlType> = match args.get(1) {
            Some(list) => list
                .split(',')
                .map(|name| {
                    *FORMAT_TYPES
                        .iter()
                        .find(|t| t.name().eq_ignore_ascii_case(name))
                        .unwrap_or_else(|| panic!("unknown format {name}"))
                })
                .collect(),
            None => FORMAT_TYPES.to_vec(),
        };
        bench_formats(&types);
        return;
    }
    if args.first().map(String::as_str) == Some("attention") {
        // `attention N ...`: causal attention of an N-token prompt alone (Qwen2.5-0.5B's heads).
        let lengths: Vec<usize> = args[1..].iter().map(|n| n.parse().expect("N")).collect();
        for n in if lengths.is_empty() {
            vec![512, 2048, 8192]
        } else {
            lengths
        } {
            bench_attention(n);
        }
        return;
    }
    if args.first().map(String::as_str) == Some("bandwidth") {
        bandwidth();
        return;
    }
    if args.first().map(String::as_str) == Some("matmul") {
        // `matmul M,N,K ...` times the given shapes instead of the default list.
        let given: Vec<(usize, usize, usize)> = args[1..]
            .iter()
            .map(|s| {
                let d: Vec<usize> = s.split(',').map(|v| v.parse().expect("M,N,K")).collect();
                (d[0], d[1], d[2])
            })
            .collect();
        let defaults = [
            (1, 1536, 576),
            (16, 1536, 576),
            (16, 9728, 896),
            (16, 151936, 896),
            (64, 1536, 576),
            (512, 1536, 576),
            (512, 4864, 896),
            (52, 4864, 896),
            (80, 4864, 896),
            (80, 896, 4864),
            (512, 896, 4864),
        ];
        for (m, n, k) in if given.is_empty() {
            defaults.to_vec()
        } else {
            given
        } {
            ours_matmul(m, n, k);
            #[cfg(feature = "candle-compare")]
            candle_matmul(m, n, k);
        }
        return;
    }
    let shapes = match args.first().map(String::as_str) {
        Some("smollm2") => vec!["smollm2"],
        Some("qwen2.5") => vec!["qwen2.5"],
        Some("llama8b-4l") => vec!["llama8b-4l"],
        _ => vec!["smollm2", "qwen2.5"],
    };
    for shape in shapes {
        for dtype in dtypes(args.get(1)) {
            let config = shape_config(shape);
            let model = Model::from_source(
                config,
                &RandomWeights::DECODER,
                &LoadOptions { dtype: Some(dtype) },
            )
            .expect("build");
            bench(&format!("{shape} {dtype:?}"), &model, KvDtype::from(dtype));
        }
    }
}

/// Prefill attention alone: `n` query tokens of one sequence against its own `n` cached
/// positions (an f16 cache unless `FORWARD_BENCH_KV` says otherwise, 16-position blocks),
/// Qwen2.5-0.5B's 14 query and 2 K/V heads of 64; the fastest of 3 runs, and the rate in query
/// tokens a second.
fn bench_attention(n: usize) {
    match kv_dtype_or(KvDtype::F16) {
        KvDtype::F32 => bench_attention_with::<f32>(n),
        KvDtype::F16 => bench_attention_with::<half::f16>(n),
        KvDtype::Bf16 => bench_attention_with::<half::bf16>(n),
    }
}

fn bench_attention_with<E: sluice_model::kernels::vector::KvElement>(n: usize) {
    use sluice_model::kernels::paged_attention::{
        paged_attention, AttentionShape, PagedKv, QueryView,
    };
    println!("  ({} KV)", std::any::type_name::<E>());
    const BLOCK: usize = 16;
    let (heads, kv_heads, d) = (14, 2, 64);
    let shape = AttentionShape {
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_dim: d,
        block_size: BLOCK,
        scale: 1.0 / (d as f32).sqrt(),
        logit_softcap: None,
    };
    let blocks = n.div_ceil(BLOCK);
    let source = RandomWeights::DECODER;
    let half = |name: &str, len: usize| -> Vec<E> {
        let v: Vec<f32> = source
            .tensor(name, &[len])
            .unwrap()
            .iter()
            .map(|&x| x * 8.0)
            .collect();
        let mut out = vec![E::default(); len];
        E::store(&v, &mut out);
        out
    };
    let keys = half("k", blocks * kv_heads * BLOCK * d);
    let values = half("v", blocks * kv_heads * BLOCK * d);
    let kv = PagedKv {
        keys: &keys,
        values: &values,
        block_stride: kv_heads * BLOCK * d,
        head_stride: BLOCK * d,
        row_stride: d,
    };
    let table: Vec<u32> = (0..blocks as u32).collect();
    let queries: Vec<QueryView> = (0..n)
        .map(|p| QueryView {
            block_table: &table,
            position: p,
            first: 0,
            last: p,
        })
        .collect();
    let q = source.tensor("q", &[n * heads * d]).unwrap();
    let mut out = vec![0f32; n * heads * d];
    let t = measure(3, || paged_attention(shape, kv, &queries, &q, &mut out));
    println!(
        "  attention, {n}-token prompt: {t}, {:>8.1} tok/s (checksum {:.4})",
        n as f64 / t.wall.as_secs_f64(),
        out.iter().sum::<f32>()
    );
    // Decode: 16 streams, each one new token after `n` cached positions (the same cache).
    let decode: Vec<QueryView> = (0..16)
        .map(|_| QueryView {
            block_table: &table,
            position: n - 1,
            first: 0,
            last: n - 1,
        })
        .collect();
    let t = measure(20, || {
        paged_attention(
            shape,
            kv,
            &decode,
            &q[..16 * heads * d],
            &mut out[..16 * heads * d],
        )
    });
    println!("  attention, 16 decodes at {n} positions: {t}");
}

/// Memory read bandwidth with every rayon thread streaming its share of a 2 GiB buffer (far
/// beyond the caches), the best of 5 passes: the bound on single-stream decode, which reads
/// every weight once per token.
fn bandwidth() {
    use rayon::prelude::*;
    const BYTES: usize = 2 << 30;
    let buffer: Vec<u64> = (0..BYTES / 8).map(|i| i as u64).collect();
    let chunk = buffer.len().div_ceil(rayon::current_num_threads() * 16);
    let mut best = Duration::MAX;
    let mut checksum = 0u64;
    for _ in 0..5 {
        let start = Instant::now();
        checksum = buffer
            .par_chunks(chunk)
            .map(|c| c.iter().fold(0u64, |a, &v| a.wrapping_add(v)))
            .reduce(|| 0, u64::wrapping_add);
        best = best.min(start.elapsed());
    }
    println!(
        "  read bandwidth: {:.1} GB/s ({} threads, 2 GiB, checksum {checksum:x})",
        BYTES as f64 / best.as_secs_f64() / 1e9,
        rayon::current_num_threads()
    );
}
