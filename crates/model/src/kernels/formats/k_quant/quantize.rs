//! Quantizers shared by the K-quant types. Like ggml's reference quantizers they search, per
//! sub-block, the scale (and minimum) that minimise the weighted squared error of the rounded
//! levels, then quantize the sub-block scales themselves against one f16 super-block scale and
//! round every weight again with the scale it will actually be read with.

use half::f16;

use super::super::act_q8k::QK_K;
use super::super::act_quant::nearest_int;
use super::layout::KBlock;

/// `v` rounded to the nearest integer within `lo..=hi` (a library call avoided: this runs for
/// every weight of every grid tried).
#[inline(always)]
fn round_within(v: f32, lo: f32, hi: f32) -> f32 {
    (nearest_int(v.clamp(lo, hi)) as f32).clamp(lo, hi)
}

/// A value rounded through f16, as the stored super-block scales are.
fn through_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// Squared-error weights for a sub-block: larger values count more (ggml's Q4_K/Q5_K choice).
pub(super) fn magnitude_weights(x: &[f32], weights: &mut [f32]) {
    let mean_square = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let rms = mean_square.sqrt();
    for (w, v) in weights.iter_mut().zip(x) {
        *w = rms + v.abs();
    }
}

/// Levels `0..=nmax` with `x ≈ scale · level − min`: tries `steps + 1` level grids around the
/// plain min-max one and keeps the least-squares `(scale, min)` of the grid with the smallest
/// weighted error. `min ≥ 0` (a sub-block of positive values is measured from zero).
pub(super) fn fit_with_min(
    x: &[f32],
    weights: &[f32],
    nmax: u8,
    (rmin, rdelta, steps): (f32, f32, usize),
) -> (f32, f32) {
    let lo = x.iter().fold(0f32, |a, &v| a.min(v));
    let hi = x.iter().fold(f32::MIN, |a, &v| a.max(v));
    if hi <= lo {
        return (0.0, -lo);
    }
    let nmax_f = f32::from(nmax);
    // Weighted sums of a level grid; the error of any (scale, min) on it follows from them:
    // Σw(s·l − m − x)² expands into these sums and Σw, Σwx, Σwx².
    let grid = |iscale: f32| {
        // Eight independent partial sums, so the loop runs as vector code (sub-blocks are
        // 16 or 32 weights).
        let (mut l1, mut l2, mut xl) = ([0f32; 8], [0f32; 8], [0f32; 8]);
        for (xs, ws) in x.chunks_exact(8).zip(weights.chunks_exact(8)) {
            for i in 0..8 {
                let l = round_within(iscale * (xs[i] - lo), 0.0, nmax_f);
                l1[i] += ws[i] * l;
                l2[i] += ws[i] * l * l;
                xl[i] += ws[i] * l * xs[i];
            }
        }
        let sum = |v: [f32; 8]| v.iter().sum::<f32>();
        (sum(l1), sum(l2), sum(xl))
    };
    let (sum_w, sum_x, sum_x2) = x
        .iter()
        .zip(weights)
        .fold((0f32, 0f32, 0f32), |(sw, sx, sx2), (&v, &w)| {
            (sw + w, sx + w * v, sx2 + w * v * v)
        });
    let error = |scale: f32, min: f32, (l1, l2, xl): (f32, f32, f32)| -> f64 {
        let (s, m) = (f64::from(scale), f64::from(min));
        let (l1, l2, xl) = (f64::from(l1), f64::from(l2), f64::from(xl));
        s * s * l2 + 2.0 * s * m * l1 - 2.0 * s * xl + m * m * f64::from(sum_w)
            - 2.0 * m * f64::from(sum_x)
            + f64::from(sum_x2)
    };
    let iscale = nmax_f / (hi - lo);
    let (mut best_scale, mut best_min) = (1.0 / iscale, lo);
    let mut best_error = error(best_scale, best_min, grid(iscale));
    for step in 0..=steps {
        let iscale = (rmin + rdelta * step as f32 + nmax_f) / (hi - lo);
        let sums @ (sum_l, sum_l2, sum_xl) = grid(iscale);
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det <= 0.0 {
            continue;
        }
        let mut scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        let mut min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if min > 0.0 {
            min = 0.0;
            scale = sum_xl / sum_l2;
        }
        let err = error(scale, min, sums);
        if err < best_error {
            (best_scale, best_min, best_error) = (scale, min, err);
        }
    }
    (best_scale, -best_min)
}

/// The scale of symmetric levels `-nmax..nmax` (`x ≈ scale · level`), weighting each value by
/// its square: tries 19 level grids around the one that maps the largest magnitude to `-nmax`
/// and keeps the least-squares scale of the best.
pub(super) fn fit_symmetric(x: &[f32], nmax: i32) -> f32 {
    let max = x
        .iter()
        .fold(0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
    if max.abs() < 1e-30 {
        return 0.0;
    }
    let sums = |iscale: f32| {
        x.iter().fold((0f32, 0f32), |(lx, l2), &v| {
            let l = round_within(iscale * v, -nmax as f32, (nmax - 1) as f32);
            let w = v * v;
            (lx + w * v * l, l2 + w * l * l)
        })
    };
    let (lx, l2) = sums(-(nmax as f32) / max);
    let mut scale = if l2 > 0.0 { lx / l2 } else { 0.0 };
    let mut best = scale * lx;
    for step in -9..=9 {
        let (lx, l2) = sums(-(nmax as f32 + 0.1 * step as f32) / max);
        if l2 > 0.0 && lx * lx > best * l2 {
            scale = lx / l2;
            best = scale * lx;
        }
    }
    scale
}

/// Finishes a super-block with minimums: sub-block `(scale, min)` pairs quantized to
/// `0..=scale_max` against f16 `d` and `dmin`, then levels `0..=nmax` for the scales as read.
pub(super) fn finish_with_min(
    x: &[f32],
    sub: usize,
    fits: &[(f32, f32)],
    scale_max: u8,
    nmax: u8,
) -> KBlock {
    let mut block = KBlock::ZERO;
    let max_scale = fits.iter().fold(0f32, |a, f| a.max(f.0));
    let max_min = fits.iter().fold(0f32, |a, f| a.max(f.1));
    let limit = f32::from(scale_max);
    let inv_scale = if max_scale > 0.0 {
        limit / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { limit / max_min } else { 0.0 };
    block.d = through_f16(max_scale / limit);
    block.dmin = through_f16(max_min / limit);
    for (s, &(scale, min)) in fits.iter().enumerate() {
        block.scales[s] = (inv_scale * scale).round().clamp(0.0, limit) as i8;
        block.mins[s] = (inv_min * min).round().clamp(0.0, limit) as u8;
        let step = block.d * f32::from(block.scales[s]);
        if step == 0.0 {
            continue;
        }
        let offset = block.dmin * f32::from(block.mins[s]);
        for (l, &v) in block.levels[s * sub..][..sub]
            .iter_mut()
            .zip(&x[s * sub..][..sub])
        {
            *l = round_within((v + offset) / step, 0.0, f32::from(nmax)) as u8;
        }
    }
    block
}

/// Finishes a centred super-block: signed sub-block scales quantized to
/// `-scale_range..scale_range` against one f16 `d`, then levels `0..2·centre` (value
/// `level − centre`) for the scales as read.
pub(super) fn finish_centred(
    x: &[f32],
    sub: usize,
    scales: &[f32],
    scale_range: i32,
    centre: i32,
) -> KBlock {
    let mut block = KBlock::ZERO;
    block.levels = [centre as u8; QK_K];
    let max = scales
        .iter()
        .fold(0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
    if max.abs() < 1e-30 {
        return block;
    }
    let iscale = -(scale_range as f32) / max;
    block.d = through_f16(1.0 / iscale);
    for (s, &scale) in scales.iter().enumerate() {
        block.scales[s] = (iscale * scale)
            .round()
            .clamp(-scale_range as f32, (scale_range - 1) as f32) as i8;
        let step = block.d * f32::from(block.scales[s]);
        if step == 0.0 {
            continue;
        }
        for (l, &v) in block.levels[s * sub..][..sub]
            .iter_mut()
            .zip(&x[s * sub..][..sub])
        {
            *l =
                (round_within(v / step, -centre as f32, (centre - 1) as f32) as i32 + centre) as u8;
        }
    }
    block
}
