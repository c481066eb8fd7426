//! What an architecture's configs mean where they leave something unsaid, as the architecture
//! registry (`crate::architectures::registry`) states it per architecture. The parser takes these
//! facts from its caller, so the config types depend on nothing of the registry.

use super::Activation;
pub use crate::moe_config::MoeSpec;

/// How an architecture reads its config: defaults of what `config.json` may leave out, and
/// behaviour neither `config.json` nor GGUF metadata states.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigSpec {
    /// The MLP gate's activation when `config.json` names none (GGUF files never do).
    pub activation: Activation,
    /// The RoPE base when `config.json` names none.
    pub rope_theta: f64,
    /// How `sliding_window` applies.
    pub window: SlidingWindow,
    /// Queries and keys are RMS-normed before RoPE whatever `config.json` says (GGUF files: where
    /// they hold the norms).
    pub qk_norm: bool,
    /// Which attention projections carry biases in `config.json` models.
    pub attention_bias: AttentionBias,
    /// Scores are scaled by `query_pre_attn_scalar^-½`, this one when `config.json` names none;
    /// GGUF files (whose converter writes none) scale by `head_dim^-½`, as llama.cpp does.
    pub query_pre_attn_scalar: Option<f64>,
    /// For a multimodal architecture whose text settings `config.json` nests under
    /// `text_config`: the text config class's defaults (a JSON object), for the fields the
    /// nested object leaves out, as the hub's checkpoints do.
    pub text_config_defaults: Option<&'static str>,
    /// Multimodal RoPE's split of the frequency pairs when the RoPE parameters state no
    /// `mrope_section` (Qwen2.5-VL's rotary embedding falls back to `[16, 24, 24]`); `None`
    /// for an architecture whose RoPE takes one position.
    pub mrope_section: Option<[usize; 3]>,
}

impl ConfigSpec {
    /// The Llama block's reading, which names sluice does not implement get too.
    pub const PLAIN: ConfigSpec = ConfigSpec {
        activation: Activation::Silu,
        rope_theta: 10_000.0,
        window: SlidingWindow::Uniform,
        qk_norm: false,
        attention_bias: AttentionBias::FromConfig,
        query_pre_attn_scalar: None,
        text_config_defaults: None,
        mrope_section: None,
    };

    /// The layer pattern when neither `layer_types` nor `sliding_window_pattern` is given: every
    /// this-many-th layer global, the others sliding.
    pub fn layer_pattern(&self) -> Option<usize> {
        match self.window {
            SlidingWindow::Interleaved { every, .. } => Some(every),
            _ => None,
        }
    }

    /// The RoPE base of sliding-window layers when the config names none, for architectures
    /// whose sliding-window layers have a RoPE of their own.
    pub fn local_rope_theta(&self) -> Option<f64> {
        match self.window {
            SlidingWindow::Interleaved {
                local_rope_theta, ..
            } => Some(local_rope_theta),
            _ => None,
        }
    }
}

/// How an architecture's `sliding_window` applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SlidingWindow {
    /// `sliding_window`, when set, to every layer (or those `layer_types` marks sliding).
    Uniform,
    /// Only with `use_sliding_window` (and then only to some layers, which sluice does not
    /// implement: an error); GGUF files' window is ignored. Qwen2's configs carry a window that
    /// does not apply otherwise.
    OptIn,
    /// Sliding-window layers interleaved with global ones, with their own RoPE: every
    /// `every`-th layer global (`config.json`'s `sliding_window_pattern`, GGUF's
    /// `attention.sliding_window_pattern`, when not given), a window of `window` (`config.json`,
    /// when not given), and a local RoPE base of `local_rope_theta` (`rope_local_base_freq`,
    /// GGUF's `rope.freq_base_swa`, when not given).
    Interleaved {
        /// Every this-many-th layer is global.
        every: usize,
        /// The window of `config.json` models that name none.
        window: usize,
        /// The sliding-window layers' RoPE base.
        local_rope_theta: f64,
    },
}

/// Which attention projections carry biases in `config.json` models (GGUF files: those whose
/// bias tensors they hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionBias {
    /// q/k/v and output projections as `attention_bias` says (none by default).
    FromConfig,
    /// q, k and v always, the output projection never (Qwen2).
    QkvOnly,
}

/// The registry's answer for an architecture name: how its configs read and its experts (`None`:
/// not a name it lists; such configs read as the Llama block, and fail to load).
pub type ArchitectureFacts = fn(&str) -> Option<(ConfigSpec, Option<MoeSpec>)>;
