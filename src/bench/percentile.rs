//! Percentiles over latency samples.
//!
//! Linear interpolation between closest ranks (numpy's default `linear` method), so p50 of an
//! even-sized sample is the mean of the two middle values and p99 of a small sample does not jump
//! to the maximum.

/// A sorted, finite set of samples (milliseconds in practice) ready for percentile queries.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    sorted: Vec<f64>,
}

impl Samples {
    /// Sorts `values`, dropping NaN and infinities (a sample that is not a number is not a latency).
    pub fn new(mut values: Vec<f64>) -> Self {
        values.retain(|v| v.is_finite());
        values.sort_by(f64::total_cmp);
        Self { sorted: values }
    }

    /// The `q`-quantile for `q` in `[0, 1]`; `None` when there are no samples.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.sorted.len();
        if n == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * (n - 1) as f64;
        let lower = rank.floor() as usize;
        let upper = rank.ceil() as usize;
        let fraction = rank - lower as f64;
        Some(self.sorted[lower] + (self.sorted[upper] - self.sorted[lower]) * fraction)
    }

    /// The median.
    pub fn p50(&self) -> Option<f64> {
        self.quantile(0.50)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Option<f64> {
        self.quantile(0.99)
    }

    /// The arithmetic mean; `None` when there are no samples.
    pub fn mean(&self) -> Option<f64> {
        if self.sorted.is_empty() {
            None
        } else {
            Some(self.sorted.iter().sum::<f64>() / self.sorted.len() as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn no_samples_have_no_percentiles() {
        let s = Samples::new(vec![]);
        assert_eq!(s.p50(), None);
        assert_eq!(s.p99(), None);
        assert_eq!(s.mean(), None);
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let s = Samples::new(vec![7.5]);
        assert_eq!(s.quantile(0.0), Some(7.5));
        assert_eq!(s.p50(), Some(7.5));
        assert_eq!(s.p99(), Some(7.5));
    }

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        let s = Samples::new(vec![4.0, 1.0, 3.0, 2.0]);
        assert!(close(s.p50().unwrap(), 2.5));
    }

    #[test]
    fn percentiles_interpolate_like_numpy_linear() {
        // numpy.percentile(range(1, 101), [50, 99, 90]) == [50.5, 99.01, 90.1]
        let s = Samples::new((1..=100).map(f64::from).collect());
        assert!(close(s.p50().unwrap(), 50.5));
        assert!(close(s.p99().unwrap(), 99.01));
        assert!(close(s.quantile(0.90).unwrap(), 90.1));
        assert!(close(s.quantile(1.0).unwrap(), 100.0));
        assert!(close(s.mean().unwrap(), 50.5));
    }

    #[test]
    fn unsorted_input_gives_the_same_percentiles_as_sorted() {
        let sorted = Samples::new(vec![1.0, 2.0, 3.0, 10.0, 50.0]);
        let shuffled = Samples::new(vec![50.0, 3.0, 1.0, 10.0, 2.0]);
        assert_eq!(sorted.p99(), shuffled.p99());
        assert_eq!(sorted.p50(), Some(3.0));
    }

    #[test]
    fn non_finite_values_are_ignored() {
        let s = Samples::new(vec![f64::NAN, 1.0, f64::INFINITY, 3.0]);
        assert_eq!(s.sorted, [1.0, 3.0]);
        assert!(close(s.p50().unwrap(), 2.0));
    }
}
