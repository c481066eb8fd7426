//! Tests of the batch-invariant matmul driver.

use super::*;
use crate::kernels::test_values;
use crate::kernels::vector::{best_ops, VectorOps};

fn naive(x: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|kk| x[i * k + kk] * w[j * k + kk]).sum();
        }
    }
    y
}

#[test]
fn matmul_matches_naive_product_for_ragged_shapes() {
    // 517 rows run as three row blocks of 174, 174 and 169.
    for (m, n, k) in [(13, 37, 29), (517, 37, 29)] {
        matches_naive(m, n, k);
    }
}

fn matches_naive(m: usize, n: usize, k: usize) {
    let x = test_values(m * k, 1);
    let w = test_values(n * k, 2);
    for dtype in [WeightDtype::F32, WeightDtype::F16] {
        let packed = PackedMatrix::pack(&w, n, k, dtype);
        let mut y = vec![0f32; m * n];
        packed.matmul(&x, m, &mut y);
        let expected = naive(&x, &w, m, n, k);
        let tol = if dtype == WeightDtype::F32 {
            1e-5
        } else {
            1e-2
        };
        for (a, b) in y.iter().zip(&expected) {
            assert!((a - b).abs() < tol, "{dtype:?}: {a} vs {b}");
        }
    }
}

#[test]
fn each_row_is_bit_identical_whatever_the_batch_size() {
    let (n, k) = (40, 33);
    let w = test_values(n * k, 3);
    // 600 rows: three row blocks in the full batch, one in every part.
    let x = test_values(600 * k, 4);
    for dtype in [WeightDtype::F32, WeightDtype::F16] {
        let packed = PackedMatrix::pack(&w, n, k, dtype);
        let mut all = vec![0f32; 600 * n];
        packed.matmul(&x, 600, &mut all);
        for (row, m_offset) in [(0usize, 0usize), (5, 3), (50, 49), (69, 60), (599, 400)] {
            let m = row - m_offset + 1;
            let mut part = vec![0f32; m * n];
            packed.matmul(&x[m_offset * k..(row + 1) * k], m, &mut part);
            assert_eq!(part[(m - 1) * n..], all[row * n..(row + 1) * n]);
        }
    }
}

/// Every quantized dtype sluice keeps weights in.
fn quantized() -> Vec<WeightDtype> {
    let names = WeightDtype::quantized_names();
    names
        .iter()
        .filter_map(|n| WeightDtype::from_name(n))
        .collect()
}

#[test]
fn quantized_rows_are_bit_identical_whatever_the_batch_size() {
    // 300 rows: many tiles a panel (expanded panels where the kernel has them); the parts
    // run 1 to 20 rows (packed panels).
    let (n, k) = (64, 256);
    let w = test_values(n * k, 13);
    let x = test_values(300 * k, 14);
    for dtype in quantized() {
        let packed = PackedMatrix::pack(&w, n, k, dtype);
        let mut all = vec![0f32; 300 * n];
        packed.matmul(&x, 300, &mut all);
        for (row, m_offset) in [(0usize, 0usize), (5, 3), (50, 31), (299, 290)] {
            let m = row - m_offset + 1;
            let mut part = vec![0f32; m * n];
            packed.matmul(&x[m_offset * k..(row + 1) * k], m, &mut part);
            let got = &part[(m - 1) * n..];
            assert_eq!(
                got,
                &all[row * n..(row + 1) * n],
                "{dtype:?}, row {row} of {m}"
            );
        }
        let gate_up = GatedMatrix::pack(&w[..n / 2 * k], &w[n / 2 * k..], n / 2, k, dtype);
        let mut y = vec![MaybeUninit::new(f32::NAN); 300 * n / 2];
        gate_up.matmul_silu(&x, 300, &mut y);
        let mut one = vec![MaybeUninit::new(f32::NAN); n / 2];
        gate_up.matmul_silu(&x[299 * k..], 1, &mut one);
        // SAFETY: every element was initialised (to NaN) before the calls.
        let (y, one): (Vec<f32>, Vec<f32>) = unsafe {
            let read = |v: &[MaybeUninit<f32>]| v.iter().map(|v| v.assume_init()).collect();
            (read(&y), read(&one))
        };
        assert_eq!(one, y[299 * n / 2..], "{dtype:?}, gated");
    }
}

#[test]
fn product_added_in_place_equals_the_product_then_the_sum() {
    let (n, k, m) = (37, 29, 13);
    let w = test_values(n * k, 10);
    let x = test_values(m * k, 11);
    let residual = test_values(m * n, 12);
    for dtype in [WeightDtype::F32, WeightDtype::F16] {
        let packed = PackedMatrix::pack(&w, n, k, dtype);
        let mut product = vec![0f32; m * n];
        packed.matmul(&x, m, &mut product);
        let expected: Vec<f32> = residual.iter().zip(&product).map(|(a, b)| a + b).collect();
        let mut y = residual.clone();
        packed.matmul_add(&x, m, &mut y);
        assert_eq!(y, expected, "{dtype:?}");
    }
}

#[test]
fn gated_product_equals_the_product_then_silu_mul_bit_for_bit() {
    let (half, k) = (48, 37);
    let w = test_values(2 * half * k, 8);
    let (gate, up) = w.split_at(half * k);
    for m in [1, 13, 517] {
        let x = test_values(m * k, 9);
        for dtype in [WeightDtype::F32, WeightDtype::F16] {
            let stacked = PackedMatrix::pack(&w, 2 * half, k, dtype);
            let mut full = vec![0f32; m * 2 * half];
            stacked.matmul(&x, m, &mut full);
            let mut expected = vec![0f32; m * half];
            for (row, out) in full
                .chunks_exact(2 * half)
                .zip(expected.chunks_exact_mut(half))
            {
                let (gate, up) = row.split_at(half);
                best_ops(half).silu_mul(gate, up, out);
            }
            let gated = GatedMatrix::pack(gate, up, half, k, dtype);
            assert_eq!(gated.bytes(), stacked.bytes());
            // NaN where nothing was written, so a missed element fails the comparison.
            let mut y = vec![MaybeUninit::new(f32::NAN); m * half];
            gated.matmul_silu(&x, m, &mut y);
            // SAFETY: every element was initialised (to NaN) before the call.
            let y: Vec<f32> = y.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert_eq!(y, expected, "{dtype:?}, {m} rows");
        }
    }
    assert!(!GatedMatrix::fits(40));
}

#[test]
fn row_into_recovers_the_unpacked_row() {
    let w = test_values(20 * 7, 7);
    let packed = PackedMatrix::pack(&w, 20, 7, WeightDtype::F32);
    let mut row = vec![0f32; 7];
    packed.row_into(17, &mut row);
    assert_eq!(row, w[17 * 7..18 * 7]);
}
