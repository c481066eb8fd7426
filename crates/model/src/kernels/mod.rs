//! CPU kernels: plain functions over slices, each with a fixed reduction order so results never
//! depend on how a batch is composed.

#[cfg(target_arch = "x86_64")]
mod amx;
pub mod dot;
pub mod formats;
pub mod isa;
pub mod matmul;
pub mod paged_attention;
mod tile;
pub mod vector;

pub use isa::Isa;

/// Splits `total` items into as few parts of at most `max_part` as possible, their sizes
/// differing by at most one (13 by 6 → 5, 4, 4, not 6, 6, 1). The kernels use it for row tiles
/// and head groups: a part keeps independent accumulator chains in registers, and too few chains
/// cannot cover the FMA latency, so a short last part costs nearly as much as a full one.
pub(crate) fn balanced_parts(total: usize, max_part: usize) -> impl Iterator<Item = usize> {
    let parts = total.div_ceil(max_part.max(1));
    let base = total.checked_div(parts).unwrap_or(0);
    let longer = total.checked_rem(parts).unwrap_or(0);
    (0..parts).map(move |i| base + usize::from(i < longer))
}

/// Deterministic pseudo-random values in `[-0.5, 0.5)` (xorshift32) for the crate's tests.
#[cfg(test)]
pub(crate) fn test_values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) - 0.5
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::balanced_parts;

    #[test]
    fn parts_are_as_few_as_possible_and_differ_by_at_most_one() {
        assert_eq!(balanced_parts(0, 6).count(), 0);
        assert_eq!(balanced_parts(13, 6).collect::<Vec<_>>(), [5, 4, 4]);
        assert_eq!(balanced_parts(16, 6).collect::<Vec<_>>(), [6, 5, 5]);
        assert_eq!(balanced_parts(7, 3).collect::<Vec<_>>(), [3, 2, 2]);
        for max_part in 1..=6 {
            for total in 1..=300 {
                let parts: Vec<usize> = balanced_parts(total, max_part).collect();
                assert_eq!(parts.iter().sum::<usize>(), total);
                assert_eq!(parts.len(), total.div_ceil(max_part));
                let (min, max) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
                assert!(
                    *max <= max_part && max - min <= 1,
                    "{total}/{max_part}: {parts:?}"
                );
            }
        }
        // Past 7 rows no 6-row tile falls short of the 4 rows that keep both FMA pipes busy.
        assert!((8..=300).all(|rows| balanced_parts(rows, 6).all(|r| r >= 4)));
    }
}
