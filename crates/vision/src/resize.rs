//! Antialiased bilinear and bicubic resizing of 8-bit images, equal bit for bit to what
//! transformers' default Gemma 3 / SigLIP (bilinear) and Qwen2-VL (bicubic) processors produce.
//!
//! transformers 5 picks the torchvision backend of an image processor when torchvision is
//! installed (`Gemma3ImageProcessor`, `Qwen2VLImageProcessor`; the `*Pil` classes only without
//! it). That backend resizes the uint8 tensor with `torchvision.transforms.v2.functional.resize(
//! bilinear or bicubic, antialias=True)`, which keeps it uint8 and calls torch's antialiased
//! interpolation for uint8 (a port of Pillow-SIMD's resampler) for bilinear on AVX2/AVX-512 and
//! arm64 CPUs and for bicubic on every CPU. Its arithmetic, reproduced here:
//!
//! - the filter: bilinear's triangle (`1 - |x|` within 1), or bicubic's Keys kernel with
//!   `a = -0.5` as PIL's (`((a + 2)|x| - (a + 3))x² + 1` within 1, `a(|x|³ - 5x² + 8|x| - 4)`
//!   within 2), whose negative lobes can overshoot, hence the clamps below;
//! - per axis, `scale = in / out` (f64); the filter is stretched by `scale` when shrinking
//!   (support `radius · scale`, taps weighted at `(j + xmin - center + 0.5) / scale`) and
//!   support `radius` when enlarging; `center = scale · (i + 0.5)`, taps
//!   `xmin = max(⌊center - support + 0.5⌋, 0)` up to `⌊center + support + 0.5⌋` (exclusive, at most
//!   `in`); weights are normalised to sum to one, in f64;
//! - the weights become int16 with `precision` fraction bits, the largest (at most 22) for which
//!   the largest weight of the axis still fits, rounded half away from zero;
//! - each output is `clamp((2^(precision-1) + Σ pixel · weight) >> precision, 0, 255)`, in exact
//!   integer arithmetic;
//! - the horizontal pass runs first, rounding to uint8, then the vertical pass over its rows;
//!   an axis whose size does not change is not resampled.
//!
//! The PIL backend uses the same filters with 22-bit weights, so it differs by at most one level
//! (the fixtures record it per image). Where torchvision takes its float path for bilinear (x86
//! CPUs without AVX2) its results may differ by a level too; the uint8 path is the one it takes
//! on the CPUs servers run.

/// The resampling filter of an antialiased resize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// The triangle filter, radius 1 (PIL's `BILINEAR`, 2).
    Bilinear,
    /// Keys' cubic convolution with `a = -0.5`, radius 2 (PIL's `BICUBIC`, 3).
    Bicubic,
}

impl Filter {
    /// The filter's reach in input pixels at scale one.
    fn radius(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Bicubic => 2.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        let x = x.abs();
        match self {
            Filter::Bilinear if x < 1.0 => 1.0 - x,
            Filter::Bicubic => {
                const A: f64 = -0.5;
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            Filter::Bilinear => 0.0,
        }
    }
}

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
    fn new(input: usize, output: usize, filter: Filter) -> Self {
        let scale = input as f64 / output as f64;
        let (support, inverse) = if scale >= 1.0 {
            (filter.radius() * scale, 1.0 / scale)
        } else {
            (filter.radius(), 1.0)
        };
        let max_taps = support.ceil() as i64 * 2 + 1;
        let mut largest = 0f64;
        let float_taps: Vec<(usize, Vec<f64>)> = (0..output)
            .map(|i| {
                let center = scale * (i as f64 + 0.5);
                // `as i64` truncates toward zero, as the reference's cast does.
                let start = ((center - support + 0.5) as i64).max(0);
                let end = ((center + support + 0.5) as i64).min(input as i64);
                let count = (end - start).clamp(0, max_taps);
                let mut weights: Vec<f64> = (0..count)
                    .map(|j| filter.weight(((j + start) as f64 - center + 0.5) * inverse))
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
/// channels]` with the triangle filter (see the module documentation for the arithmetic).
pub fn resize_bilinear_antialias(
    pixels: &[u8],
    size: (usize, usize),
    channels: usize,
    out_size: (usize, usize),
) -> Vec<u8> {
    resize_antialias(pixels, size, channels, out_size, Filter::Bilinear)
}

/// Resizes an interleaved `[height, width, channels]` uint8 image to `[out_height, out_width,
/// channels]` with `filter` (see the module documentation for the arithmetic).
pub fn resize_antialias(
    pixels: &[u8],
    (width, height): (usize, usize),
    channels: usize,
    (out_width, out_height): (usize, usize),
    filter: Filter,
) -> Vec<u8> {
    assert_eq!(pixels.len(), width * height * channels, "pixel count");
    assert!(out_width > 0 && out_height > 0, "empty output");
    let horizontal = (width != out_width).then(|| AxisWeights::new(width, out_width, filter));
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
    let vertical = AxisWeights::new(height, out_height, filter);
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
        filter: Filter,
    ) -> Vec<u8> {
        let horizontal = resize_antialias(pixels, (w, h), ch, (ow, h), filter);
        let axis = AxisWeights::new(h, oh, filter);
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
            for filter in [Filter::Bilinear, Filter::Bicubic] {
                assert_eq!(
                    resize_antialias(&pixels, size, 3, out, filter),
                    two_pass(&pixels, size, 3, out, filter),
                    "{size:?} -> {out:?} {filter:?}"
                );
            }
        }
    }

    #[test]
    fn weights_of_every_output_sum_to_one_in_fixed_point() {
        let sizes = [(48, 32), (20, 32), (1000, 7), (3, 64), (33, 32)];
        for ((input, output), filter) in
            (sizes.into_iter()).flat_map(|size| [(size, Filter::Bilinear), (size, Filter::Bicubic)])
        {
            let axis = AxisWeights::new(input, output, filter);
            assert!(axis.precision > 13 && axis.precision <= 22);
            for taps in &axis.taps {
                let sum: i32 = taps.weights.iter().map(|&w| i32::from(w)).sum();
                let one = 1i32 << axis.precision;
                assert!(
                    (sum - one).abs() <= taps.weights.len() as i32,
                    "{input}->{output} {filter:?}"
                );
                assert!(taps.start + taps.weights.len() <= input);
            }
        }
    }

    #[test]
    fn bicubic_keeps_a_constant_and_clamps_its_overshoot() {
        let flat = vec![200u8; 9 * 6 * 3];
        for size in [(4, 3), (20, 13), (9, 1)] {
            let out = resize_antialias(&flat, (9, 6), 3, size, Filter::Bicubic);
            assert!(out.iter().all(|&v| v == 200), "{size:?}");
        }
        // An edge enlarged: the negative lobes undershoot and overshoot it...
        let edge = [100u8, 100, 100, 200, 200, 200];
        let out = resize_antialias(&edge, (6, 1), 1, (18, 1), Filter::Bicubic);
        assert!(
            out.iter().any(|&v| v < 100) && out.iter().any(|&v| v > 200),
            "{out:?}"
        );
        // ...and past 0 and 255 they are clamped, not wrapped: the output stays monotone.
        let edge = [0u8, 0, 0, 255, 255, 255];
        let out = resize_antialias(&edge, (6, 1), 1, (18, 1), Filter::Bicubic);
        assert!(out.windows(2).all(|w| w[0] <= w[1]), "{out:?}");
        assert_eq!((out[0], out[17]), (0, 255));
    }
}
