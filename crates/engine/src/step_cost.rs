//! How long a step takes, learned from the steps already run.
//!
//! A step's time is modelled as `per_token · tokens + per_logit_row · logit_rows`: every batched
//! token pays for the model body, and every row that wants logits also pays for the output head
//! and sampling (on a 152k-word vocabulary that is a quarter of a decode token's cost). The two
//! rates are an exponentially weighted least-squares fit, so the model follows the machine when
//! other load comes and goes. The scheduler uses it to size prefill chunks to a time target.

/// Estimated cost rates of one step, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    /// Seconds per batched token.
    pub per_token: f64,
    /// Extra seconds per row that wants logits.
    pub per_logit_row: f64,
}

impl StepCost {
    /// Predicted seconds of a step.
    pub fn seconds(&self, tokens: usize, logit_rows: usize) -> f64 {
        self.per_token * tokens as f64 + self.per_logit_row * logit_rows as f64
    }
}

/// The online fit. Observations decay by `DECAY` per step, so roughly the last 50 steps count.
#[derive(Debug, Clone, Default)]
pub struct StepCostModel {
    /// Weighted sums of t², t·r, r², t·s and r·s over observations (t tokens, r rows, s seconds).
    tt: f64,
    tr: f64,
    rr: f64,
    ts: f64,
    rs: f64,
}

const DECAY: f64 = 0.98;

impl StepCostModel {
    /// Records one step.
    pub fn observe(&mut self, tokens: usize, logit_rows: usize, seconds: f64) {
        if tokens == 0 || !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        let (t, r) = (tokens as f64, logit_rows as f64);
        self.tt = self.tt * DECAY + t * t;
        self.tr = self.tr * DECAY + t * r;
        self.rr = self.rr * DECAY + r * r;
        self.ts = self.ts * DECAY + t * seconds;
        self.rs = self.rs * DECAY + r * seconds;
    }

    /// The current estimate; `None` before the first step.
    pub fn estimate(&self) -> Option<StepCost> {
        if self.tt <= 0.0 {
            return None;
        }
        // Only one kind of step seen so far (say decodes only, where tokens = rows): the rates
        // cannot be told apart, so every token carries the whole cost. That overestimates a
        // prompt token, which errs towards shorter steps.
        let single = StepCost {
            per_token: self.ts / self.tt,
            per_logit_row: 0.0,
        };
        let det = self.tt * self.rr - self.tr * self.tr;
        if det <= 1e-6 * self.tt * self.rr {
            return Some(single);
        }
        let per_token = (self.ts * self.rr - self.rs * self.tr) / det;
        let per_logit_row = (self.tt * self.rs - self.tr * self.ts) / det;
        if per_token > 0.0 && per_logit_row >= 0.0 {
            Some(StepCost {
                per_token,
                per_logit_row,
            })
        } else {
            // Noise can push the fit outside physics; the pooled rate is always sane.
            Some(single)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 + 1e-6 * b.abs()
    }

    #[test]
    fn no_estimate_before_the_first_step() {
        assert_eq!(StepCostModel::default().estimate(), None);
        let mut m = StepCostModel::default();
        m.observe(0, 0, 1.0);
        assert_eq!(m.estimate(), None, "an empty step says nothing about cost");
    }

    #[test]
    fn recovers_both_rates_from_mixed_steps() {
        let truth = StepCost {
            per_token: 0.004,
            per_logit_row: 0.0016,
        };
        let mut m = StepCostModel::default();
        for (t, r) in [(16, 16), (528, 17), (64, 16), (300, 2), (16, 16), (200, 20)] {
            m.observe(t, r, truth.seconds(t, r));
        }
        let e = m.estimate().unwrap();
        assert!(close(e.per_token, truth.per_token), "{e:?}");
        assert!(close(e.per_logit_row, truth.per_logit_row), "{e:?}");
    }

    #[test]
    fn decode_only_steps_pool_the_cost_per_token() {
        let mut m = StepCostModel::default();
        for _ in 0..5 {
            m.observe(16, 16, 0.096);
        }
        let e = m.estimate().unwrap();
        assert!(close(e.per_token, 0.006), "{e:?}");
        assert_eq!(e.per_logit_row, 0.0);
    }

    #[test]
    fn follows_the_machine_when_it_slows_down() {
        let mut m = StepCostModel::default();
        for i in 0..50 {
            m.observe(100 + i, 10, 0.001 * (100 + i) as f64);
        }
        for i in 0..300 {
            m.observe(100 + i % 7, 10, 0.002 * (100 + i % 7) as f64);
        }
        let e = m.estimate().unwrap();
        let per_token_at_100 = e.seconds(100, 10) / 100.0;
        assert!(
            (per_token_at_100 - 0.002).abs() < 0.0001,
            "old observations must fade: {e:?}"
        );
    }

    #[test]
    fn a_fit_outside_physics_falls_back_to_the_pooled_rate() {
        let mut m = StepCostModel::default();
        // More logit rows made the step faster: noise, not physics.
        m.observe(100, 1, 0.5);
        m.observe(100, 50, 0.3);
        let e = m.estimate().unwrap();
        assert_eq!(e.per_logit_row, 0.0, "{e:?}");
        assert!(
            (0.003..0.005).contains(&e.per_token),
            "between the two steps' own rates: {e:?}"
        );
    }
}
