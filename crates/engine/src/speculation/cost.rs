//! What extra rows cost: step seconds per row count, measured on this machine.
//!
//! A CPU decode step is bound by reading the weights, so a step of a few more rows costs little
//! more than one row; a step of many rows is bound by arithmetic, and every extra row costs its
//! share. Where the bend lies depends on the model, the weight format, the kernels and the core
//! count, so it is measured rather than modelled: the seconds of steps whose every token is a
//! sampled row (decodes and verified drafts), averaged per row count.

/// Most rows a step may have for the table to plan drafts in it; a step beyond is busy enough.
pub const MAX_ROWS: usize = 128;

/// Weight of a new observation in its row count's running average.
const ALPHA: f64 = 0.2;

/// Measured step seconds per row count.
#[derive(Debug, Clone)]
pub struct RowCosts {
    /// `[MAX_ROWS + 1]`: the running average of steps with that many rows, once seen.
    seconds: Vec<Option<f64>>,
}

impl Default for RowCosts {
    fn default() -> Self {
        RowCosts {
            seconds: vec![None; MAX_ROWS + 1],
        }
    }
}

impl RowCosts {
    /// Records a step of `tokens` tokens, `rows` of which were sampled, that took `seconds`.
    /// Steps with prompt chunks (fewer rows than tokens) say nothing about drafts and are left
    /// out.
    pub fn observe(&mut self, tokens: usize, rows: usize, seconds: f64) {
        if tokens == 0 || tokens != rows || tokens > MAX_ROWS || !seconds.is_finite() {
            return;
        }
        let slot = &mut self.seconds[tokens];
        *slot = Some(match *slot {
            Some(mean) => mean + ALPHA * (seconds - mean),
            None => seconds,
        });
    }

    /// Estimated seconds of a step of `rows` rows: measured, or between the measured counts
    /// around it, or, above every measured count and up to twice the largest, the largest
    /// one's (optimistic, so the planner tries a larger step once and measures it: the steps
    /// it explores at most double). `None` before a step of `rows` or fewer was measured, and
    /// beyond twice the largest measured.
    pub fn seconds(&self, rows: usize) -> Option<f64> {
        if rows == 0 || rows > MAX_ROWS {
            return None;
        }
        if let Some(s) = self.seconds[rows] {
            return Some(s);
        }
        let below = (1..rows)
            .rev()
            .find_map(|r| self.seconds[r].map(|s| (r, s)))?;
        let above = (rows + 1..=MAX_ROWS).find_map(|r| self.seconds[r].map(|s| (r, s)));
        match above {
            Some((r1, s1)) => {
                let (r0, s0) = below;
                Some(s0 + (s1 - s0) * (rows - r0) as f64 / (r1 - r0) as f64)
            }
            None => (rows <= 2 * below.0).then_some(below.1),
        }
    }

    /// How many draft tokens to add to a step of `rows` rows that yields `tokens_out` tokens
    /// without them, given the chances each draft token is accepted, best first: the count
    /// that maximises expected tokens per second. 0 when no draft pays for its row.
    pub fn best_draft_count(&self, rows: usize, tokens_out: f64, gains: &[f64]) -> usize {
        let Some(base) = self.seconds(rows) else {
            return 0;
        };
        let (mut best, mut best_rate) = (0, tokens_out / base);
        let mut expected = tokens_out;
        for (i, gain) in gains.iter().enumerate() {
            let Some(seconds) = self.seconds(rows + i + 1) else {
                break;
            };
            expected += gain;
            let rate = expected / seconds;
            if rate > best_rate {
                (best, best_rate) = (i + 1, rate);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(points: &[(usize, f64)]) -> RowCosts {
        let mut costs = RowCosts::default();
        for &(rows, s) in points {
            costs.observe(rows, rows, s);
        }
        costs
    }

    #[test]
    fn only_steps_of_sampled_rows_are_measured_and_averages_follow_the_machine() {
        let mut costs = table(&[(4, 0.1)]);
        costs.observe(300, 1, 9.0);
        costs.observe(8, 2, 1.0);
        assert_eq!(
            costs.seconds(8),
            Some(0.1),
            "a prompt step is not a draft step"
        );
        costs.observe(4, 4, 0.2);
        let s = costs.seconds(4).unwrap();
        assert!((s - 0.12).abs() < 1e-12, "{s}");
        assert_eq!(costs.seconds(0), None);
        assert_eq!(costs.seconds(MAX_ROWS + 1), None);
    }

    #[test]
    fn unmeasured_counts_interpolate_and_above_the_largest_are_optimistic() {
        let costs = table(&[(2, 0.10), (6, 0.14)]);
        assert_eq!(costs.seconds(1), None, "nothing measured at or below");
        assert!((costs.seconds(4).unwrap() - 0.12).abs() < 1e-12);
        assert_eq!(costs.seconds(12), Some(0.14));
        assert_eq!(
            costs.seconds(13),
            None,
            "exploration at most doubles a step"
        );
    }

    #[test]
    fn drafts_are_added_while_they_pay_for_their_rows() {
        // Memory-bound: rows almost free up to 8, then each row costs its share.
        let mut points: Vec<(usize, f64)> =
            (1..=8).map(|r| (r, 0.100 + 0.001 * r as f64)).collect();
        points.extend((9..=32).map(|r| (r, 0.02 * r as f64)));
        let costs = table(&points);
        // One stream, drafts accepted 80% a position.
        let gains: Vec<f64> = (1..=16).map(|i| 0.8f64.powi(i)).collect();
        let k = costs.best_draft_count(1, 1.0, &gains);
        assert_eq!(
            k, 7,
            "fills the cheap rows, stops where rows cost their share"
        );
        // Proposals never accepted never pay.
        assert_eq!(costs.best_draft_count(1, 1.0, &[0.0; 8]), 0);
        // Sixteen streams already past the bend: a draft must be nearly certain to pay.
        assert_eq!(costs.best_draft_count(16, 16.0, &[0.5; 4]), 0);
        assert_eq!(RowCosts::default().best_draft_count(1, 1.0, &[0.9]), 0);
    }
}
