//! A mixture-of-experts feed-forward block (Mixtral, Qwen2/3-MoE, OLMoE): a router scores every
//! expert per token, each token runs its top-k experts (gated MLPs), and their outputs are summed
//! with the routing weights.
//!
//! Dispatch is batched: the router runs once over all `T` rows, the rows are grouped by expert,
//! and each expert that any row chose runs ONE product over its gathered rows, so at 16 streams
//! an expert's weights stream from memory once per step, not once per token.
//!
//! Batch invariance: the router and expert products are the batch-invariant GEMMs of
//! `kernels/matmul` (a row's outputs are the same FMA chain whatever `m` is or where the row
//! sits), softmax and top-k work on one row's logits alone, and a row's weighted expert outputs
//! are summed from zero in ascending expert id (the order transformers' `index_add_` loop uses),
//! which depends only on the row's own routing. So a row's result is bit-identical whatever other
//! rows share the step and in whatever order they come.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::gather_rows;
use super::linear::Linear;
use super::mlp::{Mlp, MlpShape};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::SparseMlp;

/// The experts one token runs: `(expert id, routing weight)`, highest weight first.
pub type Route = Vec<(usize, f32)>;

/// Qwen2-MoE's always-on expert, scaled per token by `sigmoid(gate · x)`.
#[derive(Debug)]
struct SharedExpert {
    mlp: Mlp,
    /// `[1, hidden]`.
    gate: Linear,
}

/// One layer's router and experts.
#[derive(Debug)]
pub struct Moe {
    /// `[num_experts, hidden]`.
    router: Linear,
    /// `num_experts` gated MLPs, `[intermediate, hidden]` gate/up and `[hidden, intermediate]`
    /// down each.
    experts: Vec<Mlp>,
    shared: Option<SharedExpert>,
    experts_per_token: usize,
    renormalize: bool,
    hidden: usize,
    /// Distinct experts the last forward pass ran.
    touched: AtomicUsize,
}

impl Moe {
    /// Loads `{prefix}.gate` (the router), `{prefix}.experts.{e}.*` and, when `plan` has one,
    /// `{prefix}.shared_expert.*` and `{prefix}.shared_expert_gate`. The router keeps its stored
    /// type whatever `dtype` asks (see `weights::is_router`).
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        config: &ModelConfig,
        plan: &SparseMlp,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let hidden = config.hidden_size;
        let router = Linear::load(
            source,
            &[(&format!("{prefix}.gate"), plan.num_experts)],
            hidden,
            false,
            None,
        )?;
        let shape = |intermediate| MlpShape {
            hidden,
            intermediate,
            bias: false,
            activation: config.hidden_activation,
        };
        let experts = (0..plan.num_experts)
            .map(|e| {
                let names = plan
                    .expert_projections
                    .map(|p| format!("{prefix}.experts.{e}.{p}"));
                Mlp::load_named(source, &names, shape(plan.intermediate_size), dtype)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shared = match plan.shared_expert {
            Some(width) => {
                let names = ["gate_proj", "up_proj", "down_proj"]
                    .map(|p| format!("{prefix}.shared_expert.{p}"));
                Some(SharedExpert {
                    mlp: Mlp::load_named(source, &names, shape(width), dtype)?,
                    gate: Linear::load(
                        source,
                        &[(&format!("{prefix}.shared_expert_gate"), 1)],
                        hidden,
                        false,
                        None,
                    )?,
                })
            }
            None => None,
        };
        Ok(Self {
            router,
            experts,
            shared,
            experts_per_token: plan.experts_per_token,
            renormalize: plan.renormalize,
            hidden,
            touched: AtomicUsize::new(0),
        })
    }

    /// `x[T, hidden] += moe(h)` for `h: [T, hidden]`.
    pub fn forward_add(&self, h: &[f32], t: usize, x: &mut [f32]) {
        let logits = self.router.forward(h, t); // [T, num_experts]
        let routes: Vec<Route> = logits
            .chunks_exact(self.experts.len())
            .map(|row| route(row, self.experts_per_token, self.renormalize))
            .collect();
        let (mut out, touched) = dispatch(&routes, h, self.hidden, self.experts.len(), |e, xs| {
            let rows = xs.len() / self.hidden;
            let mut y = vec![0f32; xs.len()]; // [rows, hidden]
            self.experts[e].forward_add(xs, rows, &mut y);
            y
        });
        self.touched.store(touched, Ordering::Relaxed);
        if let Some(shared) = &self.shared {
            let gates = shared.gate.forward(h, t); // [T, 1]
            let mut y = vec![0f32; t * self.hidden]; // [T, hidden]
            shared.mlp.forward_add(h, t, &mut y);
            for ((o, y), &g) in (out.chunks_exact_mut(self.hidden))
                .zip(y.chunks_exact(self.hidden))
                .zip(&gates)
            {
                let scale = 1.0 / (1.0 + (-g).exp());
                o.iter_mut().zip(y).for_each(|(o, y)| *o += scale * y);
            }
        }
        x.iter_mut().zip(&out).for_each(|(x, o)| *x += o);
    }

    /// Distinct experts the last forward pass ran.
    pub fn experts_touched(&self) -> usize {
        self.touched.load(Ordering::Relaxed)
    }

    /// Bytes of weights: the router and every expert.
    pub fn bytes(&self) -> usize {
        self.router.bytes()
            + self.experts.iter().map(Mlp::bytes).sum::<usize>()
            + self
                .shared
                .as_ref()
                .map_or(0, |s| s.mlp.bytes() + s.gate.bytes())
    }
}

/// One row's routing from its router logits: softmax over all experts (max-subtracted, summed
/// in expert order), the `k` most probable (ties to the lower id), their probabilities divided
/// by their sum when `renormalize`. Highest weight first.
pub fn route(logits: &[f32], k: usize, renormalize: bool) -> Route {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let sum: f32 = exps.iter().sum();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    // Stable: equal probabilities keep ascending ids.
    order.sort_by(|&a, &b| exps[b].total_cmp(&exps[a]));
    let mut chosen: Route = order[..k].iter().map(|&e| (e, exps[e] / sum)).collect();
    if renormalize {
        let total: f32 = chosen.iter().map(|c| c.1).sum();
        chosen.iter_mut().for_each(|c| c.1 /= total);
    }
    chosen
}

/// Runs every row of `h: [T, hidden]` through the experts of its route and returns the weighted
/// sums `[T, hidden]` with the number of distinct experts run. `run(e, xs)` is expert `e` on
/// gathered rows `xs: [n, hidden]`, returning `[n, hidden]`; it is called once per expert that
/// any row chose, in ascending id, so each row's sum is built from zero in ascending expert id
/// whatever rows share the call.
pub fn dispatch(
    routes: &[Route],
    h: &[f32],
    hidden: usize,
    num_experts: usize,
    run: impl Fn(usize, &[f32]) -> Vec<f32>,
) -> (Vec<f32>, usize) {
    // Per expert, the rows that chose it and their weights, rows ascending.
    let mut members: Vec<Vec<(usize, f32)>> = vec![Vec::new(); num_experts];
    for (row, route) in routes.iter().enumerate() {
        for &(e, weight) in route {
            members[e].push((row, weight));
        }
    }
    let mut out = vec![0f32; routes.len() * hidden]; // [T, hidden]
    let mut touched = 0;
    for (e, rows) in members.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
        touched += 1;
        let index: Vec<usize> = rows.iter().map(|r| r.0).collect();
        let y = run(e, &gather_rows(h, hidden, &index)); // [rows, hidden]
        for (&(row, weight), y) in rows.iter().zip(y.chunks_exact(hidden)) {
            let o = &mut out[row * hidden..][..hidden];
            o.iter_mut().zip(y).for_each(|(o, y)| *o += weight * y);
        }
    }
    (out, touched)
}
