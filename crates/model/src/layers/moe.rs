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

use rayon::prelude::*;

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
/// any row chose. The experts run concurrently (at 16 streams a step runs ~80 experts per
/// layer on one or two rows each: one after another, each small product's fork and join left
/// a core idle), and each row's sum is then built from zero in ascending expert id, whatever
/// rows share the call and whichever expert finished first.
pub fn dispatch(
    routes: &[Route],
    h: &[f32],
    hidden: usize,
    num_experts: usize,
    run: impl Fn(usize, &[f32]) -> Vec<f32> + Sync,
) -> (Vec<f32>, usize) {
    // Per expert, the rows that chose it and their weights, rows ascending.
    let mut members: Vec<Vec<(usize, f32)>> = vec![Vec::new(); num_experts];
    for (row, route) in routes.iter().enumerate() {
        for &(e, weight) in route {
            members[e].push((row, weight));
        }
    }
    let active: Vec<(usize, &Vec<(usize, f32)>)> = (members.iter().enumerate())
        .filter(|(_, m)| !m.is_empty())
        .collect();
    let outputs: Vec<Vec<f32>> = active
        .par_iter()
        .map(|&(e, rows)| {
            let index: Vec<usize> = rows.iter().map(|r| r.0).collect();
            run(e, &gather_rows(h, hidden, &index)) // [rows, hidden]
        })
        .collect();
    let mut out = vec![0f32; routes.len() * hidden]; // [T, hidden]
    for (&(_, rows), y) in active.iter().zip(&outputs) {
        for (&(row, weight), y) in rows.iter().zip(y.chunks_exact(hidden)) {
            let o = &mut out[row * hidden..][..hidden];
            o.iter_mut().zip(y).for_each(|(o, y)| *o += weight * y);
        }
    }
    (out, active.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::RawTensor;
    use crate::config::MoeConfig;
    use crate::kernels::test_values;
    use std::collections::HashMap;

    /// Tensors by name, as a checkpoint would hand them over.
    struct Weights(HashMap<String, Vec<f32>>);

    impl TensorSource for Weights {
        fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
            let t = &self.0[name];
            assert_eq!(t.len(), shape.iter().product::<usize>(), "{name}");
            Ok(RawTensor::from_f32(t, shape))
        }

        fn contains(&self, name: &str) -> bool {
            self.0.contains_key(name)
        }
    }

    const HIDDEN: usize = 32;
    const INTER: usize = 48;
    const EXPERTS: usize = 8;

    /// An MoE block with random weights, `shared` adding a Qwen2-MoE shared expert.
    fn moe(dtype: WeightDtype, shared: bool) -> Moe {
        let mut w = HashMap::new();
        let mut seed = 1;
        let mut add = |name: String, len: usize| {
            seed += 1;
            w.insert(name, test_values(len, seed));
        };
        add("mlp.gate.weight".into(), EXPERTS * HIDDEN);
        let mut mlps: Vec<String> = (0..EXPERTS).map(|e| format!("experts.{e}")).collect();
        if shared {
            add("mlp.shared_expert_gate.weight".into(), HIDDEN);
            mlps.push("shared_expert".into());
        }
        for m in mlps {
            for p in ["gate_proj", "up_proj", "down_proj"] {
                add(format!("mlp.{m}.{p}.weight"), INTER * HIDDEN);
            }
        }
        let config = ModelConfig::from_json(
            &serde_json::json!({
                "architectures": ["Qwen2MoeForCausalLM"], "vocab_size": 16,
                "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": 1,
                "num_attention_heads": 2, "num_experts": EXPERTS, "num_experts_per_tok": 2,
                "shared_expert_intermediate_size": if shared { INTER } else { 0 },
            })
            .to_string(),
            None,
        )
        .expect("config");
        let moe: &MoeConfig = config.moe.as_ref().expect("moe config");
        let plan = SparseMlp::from_config(moe);
        Moe::load(&Weights(w), "mlp", &config, &plan, Some(dtype)).expect("load")
    }

    /// A tiny xorshift generator for routings and orders.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// `k` distinct experts with weights, in a random order.
    fn random_route(rng: &mut Rng, k: usize) -> Route {
        let mut route: Route = Vec::new();
        while route.len() < k {
            let e = rng.below(EXPERTS);
            if route.iter().all(|r| r.0 != e) {
                route.push((e, (1 + rng.below(1000)) as f32 / 1000.0));
            }
        }
        route
    }

    #[test]
    fn dispatched_rows_are_bit_identical_in_any_grouping_and_order() {
        for dtype in [WeightDtype::F32, WeightDtype::F16] {
            let moe = moe(dtype, false);
            let run = |e: usize, xs: &[f32]| {
                let mut y = vec![0f32; xs.len()];
                moe.experts[e].forward_add(xs, xs.len() / HIDDEN, &mut y);
                y
            };
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            for trial in 0..20 {
                let t = 1 + rng.below(40);
                let h = test_values(t * HIDDEN, 100 + trial);
                let routes: Vec<Route> = (0..t)
                    .map(|_| {
                        let k = 1 + rng.below(4);
                        random_route(&mut rng, k)
                    })
                    .collect();
                // Each row on its own.
                let solo: Vec<Vec<f32>> = (0..t)
                    .map(|r| {
                        dispatch(
                            &routes[r..=r],
                            &h[r * HIDDEN..][..HIDDEN],
                            HIDDEN,
                            EXPERTS,
                            run,
                        )
                        .0
                    })
                    .collect();
                // The rows shuffled, then cut into random groups.
                let mut order: Vec<usize> = (0..t).collect();
                for i in (1..t).rev() {
                    order.swap(i, rng.below(i + 1));
                }
                let mut start = 0;
                while start < t {
                    let end = start + 1 + rng.below(t - start);
                    let group = &order[start..end];
                    let group_routes: Vec<Route> =
                        group.iter().map(|&r| routes[r].clone()).collect();
                    let (out, touched) = dispatch(
                        &group_routes,
                        &gather_rows(&h, HIDDEN, group),
                        HIDDEN,
                        EXPERTS,
                        run,
                    );
                    let mut distinct: Vec<usize> =
                        group_routes.iter().flatten().map(|r| r.0).collect();
                    distinct.sort_unstable();
                    distinct.dedup();
                    assert_eq!(touched, distinct.len());
                    for (i, &r) in group.iter().enumerate() {
                        assert_eq!(
                            &out[i * HIDDEN..][..HIDDEN],
                            &solo[r][..],
                            "{dtype:?} row {r}"
                        );
                    }
                    start = end;
                }
            }
        }
    }

    #[test]
    fn a_row_sums_its_experts_in_ascending_id_whatever_the_route_order() {
        let moe = moe(WeightDtype::F32, false);
        let run = |e: usize, xs: &[f32]| {
            let mut y = vec![0f32; xs.len()];
            moe.experts[e].forward_add(xs, xs.len() / HIDDEN, &mut y);
            y
        };
        let h = test_values(HIDDEN, 7);
        let route: Route = vec![(6, 0.25), (1, 0.5), (3, 0.125)];
        let (out, _) = dispatch(std::slice::from_ref(&route), &h, HIDDEN, EXPERTS, run);
        let mut expected = vec![0f32; HIDDEN];
        for e in [1, 3, 6] {
            let w = route.iter().find(|r| r.0 == e).unwrap().1;
            expected
                .iter_mut()
                .zip(run(e, &h))
                .for_each(|(o, y)| *o += w * y);
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn routing_is_a_softmax_then_top_k_then_optional_renormalization() {
        let logits = [0.0, 3f32.ln(), 1f32.ln(), 2f32.ln(), 3f32.ln()];
        // Probabilities 1/10, 3/10, 1/10, 2/10, 3/10: the two 3/10 tie, lower id first.
        let plain = route(&logits, 3, false);
        let ids: Vec<usize> = plain.iter().map(|r| r.0).collect();
        assert_eq!(ids, [1, 4, 3]);
        for ((_, w), expected) in plain.iter().zip([0.3, 0.3, 0.2]) {
            assert!((w - expected).abs() < 1e-6, "{w}");
        }
        let renormalized = route(&logits, 3, true);
        for ((_, w), expected) in renormalized.iter().zip([0.375, 0.375, 0.25]) {
            assert!((w - expected).abs() < 1e-6, "{w}");
        }
    }

    #[test]
    fn a_batched_forward_equals_each_row_alone_and_counts_distinct_experts() {
        for shared in [false, true] {
            let moe = moe(WeightDtype::F32, shared);
            let t = 13;
            let h = test_values(t * HIDDEN, 11);
            let residual = test_values(t * HIDDEN, 12);
            let mut batched = residual.clone();
            moe.forward_add(&h, t, &mut batched);
            assert_ne!(batched, residual);
            assert!((1..=EXPERTS).contains(&moe.experts_touched()));
            for r in 0..t {
                let mut alone = residual[r * HIDDEN..][..HIDDEN].to_vec();
                moe.forward_add(&h[r * HIDDEN..][..HIDDEN], 1, &mut alone);
                assert_eq!(moe.experts_touched(), 2);
                assert_eq!(&batched[r * HIDDEN..][..HIDDEN], &alone[..], "row {r}");
            }
        }
    }
}
