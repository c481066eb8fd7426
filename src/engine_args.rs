//! Model loading and engine flags shared by `sluice serve` and `sluice generate`, and the load
//! settings they make.

use std::path::PathBuf;
use std::time::Duration;

use sluice_engine::kv_disk::DiskCache;
use sluice_engine::pool::{LoadSettings, MemoryShare};
use sluice_engine::{EngineConfig, FairShareConfig};
use sluice_model::kernels::isa::Isa;
use sluice_model::{KvDtype, WeightDtype};

use crate::kv_cache_memory::KvCacheMemoryArg;
use crate::speculation_args::SpeculationArgs;

/// Weight storage types accepted by `--dtype`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum DtypeArg {
    /// Each matrix as stored where sluice has a format for it (f16 stays f16, a GGUF file's
    /// quantized types stay as they are); bf16 becomes f32 (its range does not fit f16).
    Auto,
    /// 32-bit floats.
    F32,
    /// 16-bit floats, converted to f32 inside the kernels.
    F16,
    /// bfloat16, multiplied in bf16 as llama.cpp multiplies its bf16 tensors (activations
    /// rounded to bf16, sums in f32): `vdpbf16ps` on CPUs with AVX-512 BF16, about twice f32's
    /// arithmetic; elsewhere an exact scalar emulation, which is slow.
    #[value(alias = "bfloat16")]
    Bf16,
}

impl DtypeArg {
    fn weights(self) -> Option<WeightDtype> {
        match self {
            DtypeArg::Auto => None,
            DtypeArg::F32 => Some(WeightDtype::F32),
            DtypeArg::F16 => Some(WeightDtype::F16),
            DtypeArg::Bf16 => Some(WeightDtype::BF16),
        }
    }
}

/// KV cache storage types accepted by `--kv-cache-dtype`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KvDtypeArg {
    /// Following the weights: f32 when they are kept at full precision, f16 otherwise.
    Auto,
    /// 32-bit floats.
    #[value(alias = "float32")]
    F32,
    /// 16-bit IEEE floats.
    #[value(alias = "float16", alias = "half")]
    F16,
    /// bfloat16: on CPUs with AVX-512 BF16 attention multiplies in bf16 (about twice as fast at
    /// long contexts, queries and softmax weights rounded to bf16); elsewhere attends in f32.
    #[value(alias = "bfloat16")]
    Bf16,
}

impl KvDtypeArg {
    fn kv(self) -> Option<KvDtype> {
        match self {
            KvDtypeArg::Auto => None,
            KvDtypeArg::F32 => Some(KvDtype::F32),
            KvDtypeArg::F16 => Some(KvDtype::F16),
            KvDtypeArg::Bf16 => Some(KvDtype::Bf16),
        }
    }
}

/// `--quantize NAME`: a type sluice has a weight format for.
fn parse_quantize(name: &str) -> Result<WeightDtype, String> {
    WeightDtype::from_name(name)
        .filter(|d| !matches!(*d, WeightDtype::F32 | WeightDtype::F16))
        .ok_or_else(|| {
            format!(
                "unknown quantization type `{name}` (known: {})",
                WeightDtype::quantized_names().join(", ")
            )
        })
}

/// `--prefill-share F`: a share of a step, strictly between 0 and 1.
fn parse_share(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(share) if share > 0.0 && share < 1.0 => Ok(share),
        _ => Err(format!(
            "`{value}` is not a share strictly between 0 and 1 (e.g. 0.5)"
        )),
    }
}

/// Model loading and engine flags shared by `serve` and `generate`.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineArgs {
    /// Most sequences running at once.
    #[arg(long, default_value_t = 64)]
    pub max_num_seqs: usize,
    /// Token budget of one engine step (decodes plus prefill chunks).
    #[arg(long, default_value_t = 512)]
    pub max_num_batched_tokens: usize,
    /// While streams are decoding, prompt chunks are sized (from measured step times) so that
    /// one step takes about this long, which bounds the stall a new prompt causes to running
    /// streams; prompts still get at least --prefill-share of every step. 0 turns it off: only
    /// --max-num-batched-tokens bounds a step.
    #[arg(long, default_value_t = sluice_engine::DEFAULT_STEP_TIME_TARGET.as_millis() as u64)]
    pub step_time_target_ms: u64,
    /// While streams are decoding, the least share of each step's time that prompts get (0.5:
    /// as much as the decodes). A long prompt then slows the streams by at most 1/(1-share)
    /// and runs at no less than this share of its speed alone.
    #[arg(long, default_value_t = sluice_engine::DEFAULT_PREFILL_SHARE, value_parser = parse_share)]
    pub prefill_share: f64,
    /// Waiting requests allowed before new ones get 429.
    #[arg(long, default_value_t = 256)]
    pub max_queue: usize,
    /// Memory for the paged KV cache of each model, counted in --max-memory: `auto`, or GiB.
    /// `auto` sizes each model's pool to hold 4 sequences at its full context (the model's own
    /// or --max-model-len) where --max-memory allows, never more than what the budget leaves
    /// after the model's weights (half of that when several models may be loaded at once),
    /// never less than 1 GiB where that fits; the figure and the context it allows are logged
    /// at load.
    #[arg(long, default_value_t = KvCacheMemoryArg::Auto)]
    pub kv_cache_memory: KvCacheMemoryArg,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// How weights are kept in memory (bf16 checkpoints are converted at load).
    #[arg(long, value_enum, default_value_t = DtypeArg::Auto)]
    pub dtype: DtypeArg,
    /// How an image encoder (a vision tower and its projector) keeps its weights; `auto` as
    /// --dtype says. `bf16` runs the encoder in bf16, its attention included: about twice as
    /// fast on CPUs with AVX-512 BF16, with bf16's rounding (as transformers runs these models
    /// in their stored bf16).
    #[arg(long, value_enum, default_value_t = DtypeArg::Auto)]
    pub vision_dtype: DtypeArg,
    /// Quantize every weight matrix at load to this type (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
    /// q3_k, q4_k, q5_k, q6_k), from safetensors or GGUF alike; rows whose length the type's
    /// blocks do not divide fall back to q8_0 (else f16), as llama-quantize does.
    #[arg(long, value_parser = parse_quantize, conflicts_with = "dtype")]
    pub quantize: Option<WeightDtype>,
    /// How the KV cache stores keys and values; `auto` follows the weights.
    #[arg(long, value_enum, default_value_t = KvDtypeArg::Auto)]
    pub kv_cache_dtype: KvDtypeArg,
    /// Context length limit (at most the model's own).
    #[arg(long)]
    pub max_model_len: Option<usize>,
    /// Turn automatic prefix caching off.
    #[arg(long)]
    pub no_prefix_caching: bool,
    /// Keep the prefix cache's blocks in this directory too (created 0700 if missing): a
    /// prompt computed once is read back instead of computed again after it left the RAM pool,
    /// after a model unload and after a restart. Blocks are written as they are computed, off
    /// the step loop; files name the model they belong to and are checked when read. The
    /// directory holds users' prompts (as token ids and KV): keep it private. Several servers
    /// may share one.
    #[arg(long, value_name = "DIR")]
    pub kv_disk_cache: Option<PathBuf>,
    /// GiB the --kv-disk-cache directory may hold; the least recently used blocks go first.
    #[arg(long, value_name = "GIB", default_value_t = 32.0)]
    pub kv_disk_cache_size: f64,
    /// Share running sequences fairly between callers (API keys; the `user` field when there
    /// is one key or none): while a caller waits below its share (--max-num-seqs divided by the
    /// callers with work), others over theirs are not admitted and may be preempted for it. A
    /// caller alone may use every seat.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub fair_share: Switch,
    /// Most sequences one caller may run at once, even on an idle server (default: no cap).
    #[arg(long)]
    pub max_seqs_per_caller: Option<usize>,
    /// Speculative decoding.
    #[command(flatten)]
    pub speculation: SpeculationArgs,
}

/// An on/off flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl EngineArgs {
    /// The load settings these flags describe, for models that share the memory of `share`.
    pub fn launch_options(&self, share: MemoryShare) -> anyhow::Result<LoadSettings> {
        anyhow::ensure!(self.block_size > 0, "--block-size must be at least 1");
        anyhow::ensure!(self.max_num_seqs > 0, "--max-num-seqs must be at least 1");
        anyhow::ensure!(
            self.max_num_batched_tokens > 0,
            "--max-num-batched-tokens must be at least 1"
        );
        anyhow::ensure!(
            self.max_seqs_per_caller != Some(0),
            "--max-seqs-per-caller must be at least 1"
        );
        anyhow::ensure!(
            self.kv_disk_cache_size.is_finite() && self.kv_disk_cache_size > 0.0,
            "--kv-disk-cache-size must be a positive number of GiB"
        );
        let kv_disk = match &self.kv_disk_cache {
            Some(dir) if !self.no_prefix_caching => {
                let bytes = (self.kv_disk_cache_size * (1u64 << 30) as f64) as u64;
                Some(DiskCache::open(dir, bytes)?)
            }
            Some(_) => {
                anyhow::bail!("--kv-disk-cache needs prefix caching (drop --no-prefix-caching)")
            }
            None => None,
        };
        for (flag, dtype) in [
            ("--dtype", self.dtype),
            ("--vision-dtype", self.vision_dtype),
        ] {
            if matches!(dtype, DtypeArg::Bf16) && !Isa::current().has_avx512_bf16() {
                tracing::warn!(
                    "{flag} bf16: this CPU lacks AVX-512 BF16 (or SLUICE_ISA turned it off), so \
                     bf16 products run in an exact scalar emulation, many times slower than f32"
                );
            }
        }
        Ok(LoadSettings {
            dtype: self.quantize.or(self.dtype.weights()),
            vision_dtype: self.vision_dtype.weights(),
            kv_dtype: self.kv_cache_dtype.kv(),
            block_size: self.block_size,
            kv_cache_memory: self.kv_cache_memory.setting(share),
            max_model_len: self.max_model_len,
            engine: EngineConfig {
                max_num_seqs: self.max_num_seqs,
                max_num_batched_tokens: self.max_num_batched_tokens,
                max_queue: self.max_queue,
                enable_prefix_caching: !self.no_prefix_caching,
                step_time_target: (self.step_time_target_ms > 0)
                    .then(|| Duration::from_millis(self.step_time_target_ms)),
                prefill_share: self.prefill_share,
                fair_share: FairShareConfig {
                    enabled: self.fair_share == Switch::On,
                    max_seqs_per_caller: self.max_seqs_per_caller,
                },
                speculation: self.speculation.config()?,
                ..EngineConfig::default()
            },
            kv_disk,
            kv_events: None,
        })
    }
}

/// The engine flags parsed alone, as `serve` and `generate` both flatten them (for tests).
#[cfg(test)]
pub(crate) fn parse_for_test(args: &[&str]) -> Result<EngineArgs, String> {
    use clap::Parser;
    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        engine: EngineArgs,
    }
    Flags::try_parse_from(std::iter::once("sluice").chain(args.iter().copied()))
        .map(|flags| flags.engine)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(args: &[&str]) -> Result<Option<KvDtype>, String> {
        parse_for_test(args).map(|engine| engine.kv_cache_dtype.kv())
    }

    #[test]
    fn kv_cache_dtypes_take_their_names_and_vllm_s() {
        assert_eq!(kv(&[]), Ok(None));
        for (name, dtype) in [
            ("f32", KvDtype::F32),
            ("float32", KvDtype::F32),
            ("f16", KvDtype::F16),
            ("float16", KvDtype::F16),
            ("half", KvDtype::F16),
            ("bf16", KvDtype::Bf16),
            ("bfloat16", KvDtype::Bf16),
        ] {
            assert_eq!(kv(&["--kv-cache-dtype", name]), Ok(Some(dtype)), "{name}");
        }
        let err = kv(&["--kv-cache-dtype", "fp8"]).unwrap_err();
        assert!(err.contains("bf16"), "the error lists the choices: {err}");
    }

    #[test]
    fn the_step_budget_flags_reach_the_engine_and_a_share_must_be_a_fraction() {
        let engine = |args: &[&str]| {
            let share = MemoryShare {
                budget_bytes: 1 << 30,
                models: 1,
            };
            let options = parse_for_test(args).unwrap().launch_options(share).unwrap();
            (
                options.engine.step_time_target,
                options.engine.prefill_share,
            )
        };
        let defaults = (
            Some(sluice_engine::DEFAULT_STEP_TIME_TARGET),
            sluice_engine::DEFAULT_PREFILL_SHARE,
        );
        assert_eq!(engine(&[]), defaults);
        assert_eq!(
            engine(&["--step-time-target-ms", "0", "--prefill-share", "0.6"]),
            (None, 0.6)
        );
        for bad in ["0", "1", "-0.5", "1.5", "half", "NaN"] {
            let err = parse_for_test(&[&format!("--prefill-share={bad}")]).unwrap_err();
            assert!(err.contains("strictly between 0 and 1"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_vision_encoder_takes_its_own_dtype_or_the_models() {
        let settings = |args: &[&str]| {
            let engine = parse_for_test(args).unwrap();
            let share = MemoryShare {
                budget_bytes: 1 << 30,
                models: 1,
            };
            let s = engine.launch_options(share).unwrap();
            (s.dtype, s.vision_dtype)
        };
        assert_eq!(settings(&[]), (None, None));
        let bf16 = Some(WeightDtype::BF16);
        assert_eq!(settings(&["--vision-dtype", "bf16"]), (None, bf16));
        assert_eq!(settings(&["--dtype", "bfloat16"]), (bf16, None));
        let f16 = Some(WeightDtype::F16);
        assert_eq!(
            settings(&["--dtype", "f16", "--vision-dtype", "bf16"]),
            (f16, bf16)
        );
    }
}
