//! How long a step takes, learned from the steps already run.
//!
//! A step's time is modelled as `per_step + per_token · tokens + per_logit_row · logit_rows +
//! per_attended · attended`: every step pays for what does not grow with its rows (reading
//! weights a small batch leaves memory-bound, waking the threads), every batched token pays
//! for the model body, every row that wants
//! logits also pays for the output head and sampling (on a 152k-word vocabulary that is a
//! quarter of a decode token's cost), and every (token, cached position it attends to) pair
//! pays for attention, which is what makes a prompt chunk at position 8,000 several times
//! dearer than the same chunk at position 0. The rates are an exponentially weighted
//! least-squares fit, so the model follows the machine (and its attention kernels) when other
//! load comes and goes. The scheduler uses it to size prefill chunks to a time target.

/// Estimated cost rates of one step, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    /// Seconds every step costs, whatever its size.
    pub per_step: f64,
    /// Seconds per batched token.
    pub per_token: f64,
    /// Extra seconds per row that wants logits.
    pub per_logit_row: f64,
    /// Extra seconds per position a token attends to (summed over the step's tokens).
    pub per_attended: f64,
}

impl StepCost {
    /// Predicted seconds of a step of `tokens` tokens, `logit_rows` of which want logits, that
    /// attend to `attended` positions in all.
    pub fn seconds(&self, tokens: usize, logit_rows: usize, attended: u64) -> f64 {
        self.per_step
            + self.per_token * tokens as f64
            + self.per_logit_row * logit_rows as f64
            + self.per_attended * attended as f64
    }

    /// Most tokens of one prompt, starting at position `start`, that fit in `seconds` (each
    /// token at position `p` attends to `p + 1` positions); at least 0.
    pub fn prompt_tokens_within(&self, start: usize, seconds: f64) -> usize {
        if seconds <= 0.0 {
            return 0;
        }
        // k tokens cost per_token·k + per_attended·(k·start + k(k+1)/2): solve the quadratic.
        let a = self.per_attended / 2.0;
        let b = self.per_token + self.per_attended * (start as f64 + 0.5);
        let k = if a > 0.0 {
            (-b + (b * b + 4.0 * a * seconds).sqrt()) / (2.0 * a)
        } else if b > 0.0 {
            seconds / b
        } else {
            f64::INFINITY
        };
        // `as` saturates: a free step means no limit.
        k as usize
    }
}

/// The features of one step: tokens, logit rows, attended positions (scaled to keep the
/// normal equations well conditioned), and the step itself (1).
const FEATURES: usize = 4;
/// Attended positions per unit of the third feature.
const ATTENDED_UNIT: f64 = 1024.0;

/// The online fit. Observations decay by a factor per step (0.98 by default, so roughly the
/// last 50 steps count).
#[derive(Debug, Clone)]
pub struct StepCostModel {
    /// Weighted sums of xᵢ·xⱼ over observations (x = tokens, rows, attended / 1024, 1).
    xx: [[f64; FEATURES]; FEATURES],
    /// Weighted sums of xᵢ·seconds.
    xs: [f64; FEATURES],
    /// What an observation weighs one observation later.
    decay: f64,
}

impl Default for StepCostModel {
    fn default() -> Self {
        StepCostModel::with_decay(0.98)
    }
}

impl StepCostModel {
    /// A fit whose observations weigh `decay` times less at each later one (about
    /// `1 / (1 - decay)` observations count).
    pub fn with_decay(decay: f64) -> Self {
        StepCostModel {
            xx: Default::default(),
            xs: Default::default(),
            decay,
        }
    }

    /// Records one step: `tokens` batched tokens, `logit_rows` of them wanting logits,
    /// `attended` positions attended to in all, `seconds` long.
    pub fn observe(&mut self, tokens: usize, logit_rows: usize, attended: u64, seconds: f64) {
        if tokens == 0 || !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        let x = [
            tokens as f64,
            logit_rows as f64,
            attended as f64 / ATTENDED_UNIT,
            1.0,
        ];
        for i in 0..FEATURES {
            for j in 0..FEATURES {
                self.xx[i][j] = self.xx[i][j] * self.decay + x[i] * x[j];
            }
            self.xs[i] = self.xs[i] * self.decay + x[i] * seconds;
        }
    }

    /// The current estimate; `None` before the first step: the least-squares fit over the
    /// rates that are physical (none negative, a token costs something). Where the full
    /// four-rate fit is physical it is that; where noise or steps that do not tell the rates
    /// apart push it outside physics (or make it singular: decodes alone have as many logit
    /// rows as tokens), the best fit that leaves out some of the step, logit-row and attention
    /// rates (at worst every second charged to tokens alone, which overestimates a prompt
    /// token and so errs towards shorter steps).
    pub fn estimate(&self) -> Option<StepCost> {
        let (xx, xs) = (&self.xx, &self.xs);
        if xx[0][0] <= 0.0 {
            return None;
        }
        // Features a fit uses (bit i: feature i); every fit charges tokens (bit 0).
        (1u8..1 << FEATURES)
            .filter(|fit| fit & 1 != 0)
            .filter_map(|fit| {
                let rates = solve(xx, xs, fit)?;
                let physical = rates[0] > 0.0 && rates.iter().all(|&r| r >= 0.0);
                // The fit's squared error less the observations' own (the same for every
                // fit): -Σ rateᵢ·xsᵢ at the least-squares solution.
                let error = -(0..FEATURES).map(|i| rates[i] * xs[i]).sum::<f64>();
                physical.then_some((error, rates))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, [t, r, a, step])| StepCost {
                per_step: step,
                per_token: t,
                per_logit_row: r,
                per_attended: a / ATTENDED_UNIT,
            })
    }
}

/// Solves the normal equations of the features in `fit` (bit i: feature i; the others' rates
/// are 0) by Gaussian elimination; `None` when the steps seen do not tell those features apart
/// (the matrix is near singular relative to its diagonal, which bounds the determinant of such
/// a matrix).
fn solve(
    xx: &[[f64; FEATURES]; FEATURES],
    xs: &[f64; FEATURES],
    fit: u8,
) -> Option<[f64; FEATURES]> {
    let used: Vec<usize> = (0..FEATURES).filter(|i| fit & (1 << i) != 0).collect();
    let n = used.len();
    let mut m = [[0f64; FEATURES]; FEATURES];
    let mut v = [0f64; FEATURES];
    for (a, &i) in used.iter().enumerate() {
        for (b, &j) in used.iter().enumerate() {
            m[a][b] = xx[i][j];
        }
        v[a] = xs[i];
    }
    let diagonal: f64 = (0..n).map(|i| m[i][i]).product();
    let mut det = 1.0;
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col] == 0.0 {
            return None;
        }
        m.swap(col, pivot);
        v.swap(col, pivot);
        det *= m[col][col];
        for row in col + 1..n {
            let f = m[row][col] / m[col][col];
            let pivot_row = m[col];
            for (x, p) in m[row][col..n].iter_mut().zip(&pivot_row[col..n]) {
                *x -= f * p;
            }
            v[row] -= f * v[col];
        }
    }
    // (Also refuses a NaN determinant.)
    if det.abs().partial_cmp(&(1e-6 * diagonal)) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let mut x = [0f64; FEATURES];
    for row in (0..n).rev() {
        let rest: f64 = (row + 1..n).map(|k| m[row][k] * x[k]).sum();
        x[row] = (v[row] - rest) / m[row][row];
    }
    let mut rates = [0f64; FEATURES];
    for (a, &i) in used.iter().enumerate() {
        rates[i] = x[a];
    }
    Some(rates)
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
        m.observe(0, 0, 0, 1.0);
        assert_eq!(m.estimate(), None, "an empty step says nothing about cost");
    }

    #[test]
    fn recovers_both_rates_from_mixed_steps() {
        let truth = StepCost {
            per_step: 0.0,
            per_token: 0.004,
            per_logit_row: 0.0016,
            per_attended: 0.0,
        };
        let mut m = StepCostModel::default();
        for (t, r) in [(16, 16), (528, 17), (64, 16), (300, 2), (16, 16), (200, 20)] {
            m.observe(t, r, 0, truth.seconds(t, r, 0));
        }
        let e = m.estimate().unwrap();
        assert!(close(e.per_token, truth.per_token), "{e:?}");
        assert!(close(e.per_logit_row, truth.per_logit_row), "{e:?}");
    }

    #[test]
    fn decode_only_steps_pool_the_cost_per_token() {
        let mut m = StepCostModel::default();
        for _ in 0..5 {
            m.observe(16, 16, 16 * 100, 0.096);
        }
        let e = m.estimate().unwrap();
        assert!(close(e.per_token, 0.006), "{e:?}");
        assert_eq!(e.per_logit_row, 0.0);
    }

    #[test]
    fn follows_the_machine_when_it_slows_down() {
        let mut m = StepCostModel::default();
        for i in 0..50 {
            m.observe(100 + i, 10, 0, 0.001 * (100 + i) as f64);
        }
        for i in 0..300 {
            m.observe(100 + i % 7, 10, 0, 0.002 * (100 + i % 7) as f64);
        }
        let e = m.estimate().unwrap();
        let per_token_at_100 = e.seconds(100, 10, 0) / 100.0;
        assert!(
            (per_token_at_100 - 0.002).abs() < 0.0001,
            "old observations must fade: {e:?}"
        );
    }

    #[test]
    fn a_fit_outside_physics_falls_back_to_the_pooled_rate() {
        let mut m = StepCostModel::default();
        // More logit rows made the step faster: noise, not physics.
        m.observe(100, 1, 0, 0.5);
        m.observe(100, 50, 0, 0.3);
        let e = m.estimate().unwrap();
        assert_eq!(e.per_logit_row, 0.0, "{e:?}");
        assert!(
            (0.003..0.005).contains(&e.per_token),
            "between the two steps' own rates: {e:?}"
        );
    }

    #[test]
    fn noise_in_the_logit_rows_does_not_drop_the_attention() {
        let mut m = StepCostModel::default();
        // 1 ms a token and 0.1 µs per attended position; the second step's extra logit rows
        // came out faster (noise), which makes the three-rate fit's row rate negative.
        m.observe(100, 1, 0, 0.1);
        m.observe(100, 50, 0, 0.09);
        m.observe(50, 1, 500_000, 0.1);
        m.observe(50, 1, 0, 0.05);
        let e = m.estimate().unwrap();
        assert_eq!(e.per_logit_row, 0.0, "{e:?}");
        let deep = e.seconds(50, 1, 500_000);
        assert!(
            (deep - 0.1).abs() < 0.01,
            "a deep chunk still costs its attention: {e:?}"
        );
    }

    #[test]
    fn decode_steps_of_any_size_tell_the_step_cost_from_the_token_cost() {
        let truth = StepCost {
            per_step: 0.012,
            per_token: 0.0027,
            per_logit_row: 0.0,
            per_attended: 0.0,
        };
        let mut m = StepCostModel::default();
        // One stream decoding, then four, then sixteen: a pooled rate per token would put
        // 15 ms on each of the sixteen.
        for n in [1, 1, 4, 4, 16] {
            m.observe(n, n, 0, truth.seconds(n, n, 0));
        }
        let e = m.estimate().unwrap();
        let sixteen = e.seconds(16, 16, 0);
        assert!(close(sixteen, truth.seconds(16, 16, 0)), "{e:?}");
        assert!(close(e.per_step, 0.012), "{e:?}");
    }

    #[test]
    fn recovers_the_attention_rate_from_chunks_at_growing_positions() {
        let truth = StepCost {
            per_step: 0.0,
            per_token: 0.0015,
            per_logit_row: 0.0004,
            per_attended: 2e-8,
        };
        let mut m = StepCostModel::default();
        // 15 decodes at ~1,000 positions beside 256-token chunks of an 8K prompt, and decodes
        // alone.
        for chunk in 0..32u64 {
            let start = chunk * 256;
            let attended = 15 * 1000 + (start * 256 + 256 * 257 / 2);
            m.observe(271, 16, attended, truth.seconds(271, 16, attended));
            m.observe(15, 15, 15 * 1000, truth.seconds(15, 15, 15 * 1000));
        }
        let e = m.estimate().unwrap();
        assert!(close(e.per_token, truth.per_token), "{e:?}");
        assert!(close(e.per_logit_row, truth.per_logit_row), "{e:?}");
        assert!((e.per_attended - truth.per_attended).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn a_later_prompt_chunk_gets_fewer_tokens_for_the_same_time() {
        let cost = StepCost {
            per_step: 0.0,
            per_token: 0.001,
            per_logit_row: 0.0,
            per_attended: 1e-7,
        };
        let early = cost.prompt_tokens_within(0, 0.1);
        let late = cost.prompt_tokens_within(8000, 0.1);
        assert!(early > 90 && early < 100, "{early}");
        assert!(3 * late < 2 * early, "{late} vs {early}");
        for (start, k) in [(0, early), (8000, late)] {
            let spent = cost.per_token * k as f64
                + cost.per_attended * (k * start + k * (k + 1) / 2) as f64;
            let more = spent + cost.per_token + cost.per_attended * (start + k + 1) as f64;
            assert!(
                spent <= 0.1 + 1e-12 && more > 0.1,
                "{start}: {k} tokens, {spent} s"
            );
        }
        let flat = StepCost {
            per_attended: 0.0,
            ..cost
        };
        assert_eq!(flat.prompt_tokens_within(8000, 0.1), 100);
        assert_eq!(flat.prompt_tokens_within(0, 0.0), 0);
    }
}
