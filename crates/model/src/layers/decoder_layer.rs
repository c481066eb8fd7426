//! One transformer block (`model.layers.{i}`): attention, then the feed-forward block, each
//! between its norms and added into the residual stream; and the [`Workspace`] of scratch
//! buffers the blocks of one forward pass share.

use super::attention::{Attention, AttentionScratch};
use super::feed_forward::FeedForward;
use super::norm::RmsNorm;
use super::step::{Rows, StepContext};
use super::{gather_rows_into, resized, zeroed};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::kv_cache::LayerCache;
use crate::plan::{LayerPlan, NormPlacement, NormWeight};

/// The norms around one sub-block (attention or MLP).
#[derive(Debug)]
struct Norms {
    /// `[hidden]`: applied to the residual stream before the sub-block.
    before: RmsNorm,
    /// `[hidden]`: applied to the sub-block's output before it joins the residual (Gemma).
    after: Option<RmsNorm>,
}

impl Norms {
    fn bytes(&self) -> usize {
        self.before.bytes() + self.after.as_ref().map_or(0, RmsNorm::bytes)
    }
}

/// The scratch buffers of one forward pass. The layers use them in turn: each buffer grows to
/// the largest size a layer asks of it and is reused by the next, so a step allocates them once
/// rather than once per layer.
#[derive(Debug, Default)]
pub struct Workspace<'a> {
    /// `[rows, hidden]`: the residual stream. Every token's row, until a layer keeps only the
    /// rows whose output is wanted.
    pub(crate) x: Vec<f32>,
    /// `[T, hidden]`: the normed input of the current sub-block.
    h: Vec<f32>,
    /// `[rows, hidden]`: where rows are gathered to, and a sandwich-normed sub-block's output
    /// before it joins the residual stream.
    pub(crate) scratch: Vec<f32>,
    /// The attention block's buffers.
    attention: AttentionScratch<'a>,
}

/// One transformer block's weights.
#[derive(Debug)]
pub struct DecoderLayer {
    attn_norms: Norms,
    self_attn: Attention,
    mlp_norms: Norms,
    mlp: FeedForward,
    hidden: usize,
}

impl DecoderLayer {
    /// Loads `model.layers.{index}` as `plan` describes it, its norms applying their weights as
    /// `norm_weight` says and its attention rotating with the decoder's rotary embedding number
    /// `rope`.
    pub fn load(
        source: &dyn TensorSource,
        config: &ModelConfig,
        index: usize,
        plan: &LayerPlan,
        norm_weight: NormWeight,
        rope: usize,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let (hidden, eps) = (config.hidden_size, config.rms_norm_eps);
        let prefix = format!("model.layers.{index}");
        let norm = |name: &str| {
            RmsNorm::load(
                source,
                &format!("{prefix}.{name}"),
                hidden,
                eps,
                norm_weight,
            )
        };
        let (attn_norms, mlp_norms) = match plan.norms {
            NormPlacement::Pre => (
                Norms {
                    before: norm("input_layernorm")?,
                    after: None,
                },
                Norms {
                    before: norm("post_attention_layernorm")?,
                    after: None,
                },
            ),
            NormPlacement::Sandwich => (
                Norms {
                    before: norm("input_layernorm")?,
                    after: Some(norm("post_attention_layernorm")?),
                },
                Norms {
                    before: norm("pre_feedforward_layernorm")?,
                    after: Some(norm("post_feedforward_layernorm")?),
                },
            ),
        };
        let self_attn = Attention::load(
            source,
            &format!("{prefix}.self_attn"),
            config,
            plan.attention,
            norm_weight,
            rope,
            dtype,
        )?;
        let mlp = FeedForward::load(source, &prefix, config, &plan.mlp, plan.activation, dtype)?;
        Ok(Self {
            attn_norms,
            self_attn,
            mlp_norms,
            mlp,
            hidden,
        })
    }

    /// Runs the block over the step. `ws.x` (`[T, hidden]`, the residual stream) gets the
    /// attention and feed-forward outputs of `rows` added; when `rows` is not every row it keeps
    /// only those rows, in that order (`[rows, hidden]`). Every token's K/V is written into `kv`.
    pub(crate) fn forward<'a>(
        &self,
        ctx: &StepContext<'a>,
        kv: LayerCache<'_>,
        rows: Rows<'_>,
        ws: &mut Workspace<'a>,
    ) {
        let Workspace {
            x,
            h,
            scratch,
            attention,
        } = ws;
        // Every token's normed row: all of them write K/V.
        let h = resized(h, x.len()); // [T, hidden]
        self.attn_norms.before.forward(x, h);
        if let Rows::Only(wanted) = rows {
            gather_rows_into(x, self.hidden, wanted, scratch);
            std::mem::swap(x, scratch); // x: [rows, hidden]
        }
        add_normed(&self.attn_norms, x, scratch, |out| {
            self.self_attn.forward(ctx, kv, rows, h, attention, out)
        });
        let h = &mut h[..x.len()]; // [rows, hidden]
        self.mlp_norms.before.forward(x, h);
        add_normed(&self.mlp_norms, x, scratch, |out| {
            self.mlp.forward_add(h, rows.len(), out)
        });
    }

    /// Distinct experts the last forward pass ran; `None` for a dense block.
    pub fn experts_touched(&self) -> Option<usize> {
        self.mlp.experts_touched()
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.attn_norms.bytes() + self.self_attn.bytes() + self.mlp_norms.bytes() + self.mlp.bytes()
    }
}

/// Adds a sub-block's output into the residual `x: [rows, hidden]`: directly (`add` accumulates
/// into what it is given), or, with a norm after the sub-block, through `scratch` zeroed and
/// normed before the add.
fn add_normed(norms: &Norms, x: &mut [f32], scratch: &mut Vec<f32>, add: impl FnOnce(&mut [f32])) {
    match &norms.after {
        None => add(x),
        Some(after) => {
            let out = zeroed(scratch, x.len()); // [rows, hidden]
            add(out);
            after.forward_in_place(out);
            x.iter_mut().zip(&*out).for_each(|(x, o)| *x += o);
        }
    }
}
