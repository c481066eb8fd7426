//! Antialiased bilinear resizing of 8-bit images, equal bit for bit to what transformers' default
//! Gemma 3 / SigLIP processor produces.
//!
//! transformers 5 picks the torchvision backend of an image processor when torchvision is
//! installed (`Gemma3ImageProcessor`; `Gemma3ImageProcessorPil` only without it). That backend
//! resizes the uint8 tensor with `torchvision.transforms.v2.functional.resize(bilinear,
//! antialias=True)`, which on AVX2/AVX-512 and arm64 CPUs keeps it uint8 and calls torch's
//! antialiased bilinear interpolation for uint8 (a port of Pillow-SIMD's resampler). Its
//! arithmetic, reproduced here:
//!
//! - per axis, `scale = in / out` (f64); the triangle filter is stretched by `scale` when
//!   shrinking (support `scale`, taps weighted at `(j + xmin - center + 0.5) / scale`) and
//!   support 1 when enlarging; `center = scale · (i + 0.5)`, taps
//!   `xmin = max(⌊center - support + 0.5⌋, 0)` up to `⌊center + support + 0.5⌋` (exclusive, at most
//!   `in`); weights are normalised to sum to one, in f64;
//! - the weights become int16 with `precision` fraction bits, the largest (at most 22) for which
//!   the largest weight of the axis still fits, rounded half away from zero;
//! - each output is `clamp((2^(precision-1) + Σ pixel · weight) >> precision, 0, 255)`, in exact
//!   integer arithmetic;
//! - the horizontal pass runs first, rounding to uint8, then the vertical pass over its rows;
//!   an axis whose size does not change is not resampled.
//!
//! The PIL backend uses the same filter with 22-bit weights, so it differs by at most one level
//! (the fixture records it per image). Where torchvision takes its float path (x86 CPUs without
//! AVX2) its results may differ by a level too; the uint8 path is the one it takes on the CPUs
//! servers run.

/// The taps of one output position: the first input index and one weight per tap.
#[derive(Debug, Clone)]
struct Taps {
    start: usize,
    weights: Vec<i16>,
}

/// The int16 weights of one axis resized from `input` to `output` positions.
#[derive(Debug, Clone)]
struct AxisWeights {
    taps: Vec<Taps>,
    precision: u32,
}

impl AxisWeights {
    fn new(input: usize, output: usize) -> Self {
        let scale = input as f64 / output as f64;
        let (support, inverse) = if scale >= 1.0 {
            (scale, 1.0 / scale)
        } else {
            (1.0, 1.0)
        };
        let max_taps = support.ceil() as i64 * 2 + 1;
        let triangle = |x: f64| {
            let x = x.abs();
            if x < 1.0 {
                1.0 - x
            } else {
                0.0
            }
        };
        let mut largest = 0f64;
        let float_taps: Vec<(usize, Vec<f64>)> = (0..output)
            .map(|i| {
                let center = scale * (i as f64 + 0.5);
                // `as i64` truncates toward zero, as the reference's cast does.
                let start = ((center - support + 0.5) as i64).max(0);
                let end = ((center + support + 0.5) as i64).min(input as i64);
                let count = (end - start).clamp(0, max_taps);
                let mut weights: Vec<f64> = (0..count)
                    .map(|j| triangle(((j + start) as f64 - center + 0.5) * inverse))
                    .collect();
                let total: f64 = weights.iter().sum();
                if total != 0.0 {
                    for w in &mut weights {
                        *w /= total;
                        largest = largest.max(*w);
                    }
                }
                (start as usize, weights)
            })
            .collect();
        let mut precision = 0;
        while precision < 22 {
            let next = (0.5 + largest * f64::from(1u32 << (precision + 1))) as i32;
            if next >= 1 << 15 {
                break;
            }
            precision += 1;
        }
        let one = f64::from(1u32 << precision);
        let taps = (float_taps.into_iter())
            .map(|(start, weights)| Taps {
                start,
                weights: (weights.iter())
                    .map(|&w| {
                        let v = w * one;
                        (if v < 0.0 { v - 0.5 } else { v + 0.5 }) as i16
                    })
                    .collect(),
            })
            .collect();
        Self { taps, precision }
    }

    /// `Σ sample(start + j) · weight_j`, rounded and clamped to a level.
    #[inline]
    fn apply(&self, taps: &Taps, sample: impl Fn(usize) -> u8) -> u8 {
        let mut sum: i32 = 1 << (self.precision - 1);
        for (j, &w) in taps.weights.iter().enumerate() {
            sum += i32::from(sample(taps.start + j)) * i32::from(w);
        }
        (sum >> self.precision).clamp(0, 255) as u8
    }
}

/// Resizes an interleaved `[height, width, channels]` uint8 image to `[out_height, out_width,
/// channels]` (see the module documentation for the arithmetic).
pub fn resize_bilinear_antialias(
    pixels: &[u8],
    (width, height): (usize, usize),
    channels: usize,
    (out_width, out_height): (usize, usize),
) -> Vec<u8> {
    assert_eq!(pixels.len(), width * height * channels, "pixel count");
    assert!(out_width > 0 && out_height > 0, "empty output");
    let horizontal = (width != out_width).then(|| AxisWeights::new(width, out_width));
    let stride = out_width * channels;
    let mut row_out = Vec::with_capacity(stride);
    // One input row resized horizontally (or as it is when the width stays).
    let resized_row = |row: &[u8], out: &mut Vec<u8>| match &horizontal {
        None => out.extend_from_slice(row),
        Some(axis) => {
            for taps in &axis.taps {
                for c in 0..channels {
                    out.push(axis.apply(taps, |x| row[x * channels + c]));
                }
            }
        }
    };
    let rows = pixels.chunks_exact(width * channels);
    if height == out_height {
        let mut out = Vec::with_capacity(out_height * stride);
        rows.for_each(|row| resized_row(row, &mut out));
        return out;
    }
    let vertical = AxisWeights::new(height, out_height);
    // The vertical pass accumulates each horizontally resized row into the output rows whose
    // taps cover it, as soon as it is made: the integer sums equal the two-pass result, and
    // memory stays at the output's size whatever the input's aspect ratio (a 1 × 30,000,000
    // image would otherwise need an intermediate of 30,000,000 resized rows).
    let mut sums = vec![1i32 << (vertical.precision - 1); out_height * stride];
    let mut first_open = 0;
    for (r, row) in rows.enumerate() {
        row_out.clear();
        resized_row(row, &mut row_out);
        let taps = &vertical.taps;
        while first_open < out_height
            && taps[first_open].start + taps[first_open].weights.len() <= r
        {
            first_open += 1;
        }
        for (y, tap) in taps.iter().enumerate().skip(first_open) {
            if tap.start > r {
                break;
            }
            let Some(&weight) = tap.weights.get(r - tap.start) else {
                continue;
            };
            let weight = i32::from(weight);
            for (sum, &v) in sums[y * stride..][..stride].iter_mut().zip(&row_out) {
                *sum += i32::from(v) * weight;
            }
        }
    }
    (sums.iter())
        .map(|&sum| (sum >> vertical.precision).clamp(0, 255) as u8)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_size_is_a_copy() {
        let pixels: Vec<u8> = (0..24).collect();
        assert_eq!(
            resize_bilinear_antialias(&pixels, (4, 2), 3, (4, 2)),
            pixels
        );
    }

    #[test]
    fn halving_weighs_three_inputs_and_a_constant_stays_constant() {
        // Shrinking by two stretches the triangle to ±2 inputs: weights 3/7, 3/7, 1/7 at the
        // left edge (10·3 + 20·3 + 30) / 7 = 17.1, and 1/7, 3/7, 3/7 next, (20 + 30·3 + 41·3) / 7
        // = 33.3.
        let row = [10u8, 20, 30, 41];
        assert_eq!(resize_bilinear_antialias(&row, (4, 1), 1, (2, 1)), [17, 33]);
        let flat = vec![77u8; 7 * 5 * 3];
        for size in [(3, 2), (11, 9), (7, 1)] {
            let out = resize_bilinear_antialias(&flat, (7, 5), 3, size);
            assert!(out.iter().all(|&v| v == 77), "{size:?}");
        }
    }

    /// The two passes as the reference runs them: the whole horizontally resized image, then
    /// the vertical pass over it.
    fn two_pass(
        pixels: &[u8],
        (w, h): (usize, usize),
        ch: usize,
        (ow, oh): (usize, usize),
    ) -> Vec<u8> {
        let horizontal = resize_bilinear_antialias(pixels, (w, h), ch, (ow, h));
        let axis = AxisWeights::new(h, oh);
        let stride = ow * ch;
        let mut out = Vec::new();
        for taps in &axis.taps {
            for x in 0..stride {
                out.push(axis.apply(taps, |y| horizontal[y * stride + x]));
            }
        }
        out
    }

    #[test]
    fn accumulating_rows_as_they_come_equals_the_two_pass_resize() {
        let mut state = 12345u32;
        for (size, out) in [
            ((7, 50), (4, 3)),
            ((1, 300), (5, 2)),
            ((9, 4), (3, 11)),
            ((33, 33), (32, 32)),
        ] {
            let pixels: Vec<u8> = (0..size.0 * size.1 * 3)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (state >> 16) as u8
                })
                .collect();
            assert_eq!(
                resize_bilinear_antialias(&pixels, size, 3, out),
                two_pass(&pixels, size, 3, out),
                "{size:?} -> {out:?}"
            );
        }
    }

    #[test]
    fn weights_of_every_output_sum_to_one_in_fixed_point() {
        for (input, output) in [(48, 32), (20, 32), (1000, 7), (3, 64), (33, 32)] {
            let axis = AxisWeights::new(input, output);
            assert!(axis.precision > 13 && axis.precision <= 22);
            for taps in &axis.taps {
                let sum: i32 = taps.weights.iter().map(|&w| i32::from(w)).sum();
                let one = 1i32 << axis.precision;
                assert!(
                    (sum - one).abs() <= taps.weights.len() as i32,
                    "{input}->{output}"
                );
                assert!(taps.start + taps.weights.len() <= input);
            }
        }
    }
}
