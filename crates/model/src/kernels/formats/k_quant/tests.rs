//! What the K-quant formats must do beyond the properties every format has (`tests.rs`):
//! read ggml's blocks exactly, quantize soundly and multiply to the product of what they store.

use super::super::act_q8k::{BlockQ8K, QK_K};
use super::super::*;
use super::{q2_k, q3_k, q4_k, q5_k, q6_k, KQuant};

use crate::kernels::test_values;

/// Every registered K-quant type with its committed fixture (blocks, reference values from
/// `scripts/make_kquant_fixtures.py`) and the round-trip RMS error, relative to the data's
/// RMS, its quantizer must stay under on normal data.
fn k_types() -> Vec<(GgmlType, &'static [u8], &'static [u8], f32)> {
    macro_rules! fixture {
        ($name:literal) => {
            (
                &include_bytes!(concat!(
                    "../../../../../../fixtures/quants/",
                    $name,
                    ".blocks"
                ))[..],
                &include_bytes!(concat!("../../../../../../fixtures/quants/", $name, ".f32"))[..],
            )
        };
    }
    let all = [
        (GgmlType::Q2_K, fixture!("q2_k"), 0.30),
        (GgmlType::Q3_K, fixture!("q3_k"), 0.17),
        (GgmlType::Q4_K, fixture!("q4_k"), 0.08),
        (GgmlType::Q5_K, fixture!("q5_k"), 0.04),
        (GgmlType::Q6_K, fixture!("q6_k"), 0.02),
    ];
    all.into_iter()
        .filter(|(ty, ..)| format_for(*ty).is_some())
        .map(|(ty, (blocks, values), bound)| (ty, blocks, values, bound))
        .collect()
}

/// Roughly standard normal values (a sum of four uniforms, scaled to unit variance).
fn normal_values(n: usize, seed: u32) -> Vec<f32> {
    let u = test_values(4 * n, seed);
    u.chunks_exact(4)
        .map(|c| c.iter().sum::<f32>() * 3f32.sqrt())
        .collect()
}

fn rms(v: impl Iterator<Item = f32>) -> f32 {
    let (sum, n) = v.fold((0f64, 0usize), |(s, n), x| (s + f64::from(x * x), n + 1));
    (sum / n as f64).sqrt() as f32
}

#[test]
fn k_types_are_registered() {
    let registered: Vec<GgmlType> = k_types().iter().map(|t| t.0).collect();
    assert!(registered.contains(&GgmlType::Q4_K) && registered.contains(&GgmlType::Q6_K));
}

#[test]
fn dequantization_is_bit_exact_with_the_gguf_reference() {
    for (ty, blocks, expected, _) in k_types() {
        let expected: Vec<f32> = expected
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let mut values = vec![0f32; expected.len()];
        decode(ty, blocks, expected.len(), &mut values).unwrap();
        let same = values
            .iter()
            .zip(&expected)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{ty}: dequantized values differ from the reference");
    }
}

fn stored_round_trip<Q: KQuant>(blocks: &[u8]) {
    let size = Q::TYPE.block().unwrap().1;
    for block in blocks.chunks_exact(size) {
        let mut again = vec![0u8; size];
        Q::store(&Q::parse(block), &mut again);
        assert_eq!(again, block, "{}", Q::TYPE);
    }
}

#[test]
fn stored_blocks_survive_a_read_and_write_unchanged() {
    for (ty, blocks, ..) in k_types() {
        match ty {
            GgmlType::Q2_K => stored_round_trip::<q2_k::Q2K>(blocks),
            GgmlType::Q3_K => stored_round_trip::<q3_k::Q3K>(blocks),
            GgmlType::Q4_K => stored_round_trip::<q4_k::Q4K>(blocks),
            GgmlType::Q5_K => stored_round_trip::<q5_k::Q5K>(blocks),
            GgmlType::Q6_K => stored_round_trip::<q6_k::Q6K>(blocks),
            _ => panic!("{ty} has no round-trip check"),
        }
    }
}

#[test]
fn a_packed_panel_reads_back_the_reference_values() {
    for (ty, blocks, _, _) in k_types() {
        let format = format_for(ty).unwrap();
        let k = blocks.len() / format.block().1 * QK_K;
        let mut values = vec![0f32; k];
        format.decode_row(blocks, &mut values);
        let rows = [blocks];
        let mut panel = vec![0u8; format.panel_bytes(k)];
        format.pack_panel(&rows, k, &mut panel);
        let mut unpacked = vec![0f32; k];
        format.unpack_row(&panel, k, 0, &mut unpacked);
        assert_eq!(
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            unpacked.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{ty}"
        );
    }
}

#[test]
fn quantization_error_on_normal_data_stays_within_each_types_bound() {
    let k = 16 * QK_K;
    let w = normal_values(k, 21);
    for (ty, _, _, bound) in k_types() {
        let format = format_for(ty).unwrap();
        let mut stored = vec![0u8; format.row_bytes(k)];
        format.encode_row(&w, &mut stored);
        let mut back = vec![0f32; k];
        format.decode_row(&stored, &mut back);
        let error = rms(w.iter().zip(&back).map(|(a, b)| a - b)) / rms(w.iter().copied());
        eprintln!("{ty}: relative RMS error {error:.4}");
        assert!(
            error < bound,
            "{ty}: relative RMS error {error} over {bound}"
        );
    }
}

#[test]
fn quantizing_zeros_and_constants_is_exact_enough() {
    for (ty, ..) in k_types() {
        let format = format_for(ty).unwrap();
        for value in [0.0f32, 0.25, -3.0] {
            let w = vec![value; QK_K];
            let mut stored = vec![0u8; format.row_bytes(QK_K)];
            format.encode_row(&w, &mut stored);
            let mut back = vec![0f32; QK_K];
            format.decode_row(&stored, &mut back);
            for v in back {
                assert!(
                    (v - value).abs() <= value.abs() * 0.01,
                    "{ty}: {value} read as {v}"
                );
            }
        }
    }
}

#[test]
fn tile_equals_the_f32_product_of_what_is_stored() {
    let (k, rows) = (3 * QK_K, TILE_ROWS);
    let w = normal_values(PANEL * k, 22);
    let x = normal_values(rows * k, 23);
    // What the kernel multiplies: the activations as quantized.
    let xq: Vec<f32> = x
        .chunks_exact(QK_K)
        .flat_map(|c| BlockQ8K::quantize(c).dequantize())
        .collect();
    let isas = Isa::tested("the K-quant tiles");
    for (ty, ..) in k_types() {
        let format = format_for(ty).unwrap();
        let row_bytes = format.row_bytes(k);
        let mut stored = vec![0u8; PANEL * row_bytes];
        for (dst, src) in stored.chunks_exact_mut(row_bytes).zip(w.chunks_exact(k)) {
            format.encode_row(src, dst);
        }
        let mut wq = vec![0f32; PANEL * k];
        decode(ty, &stored, k, &mut wq).unwrap();
        let refs: Vec<&[u8]> = stored.chunks_exact(row_bytes).collect();
        let mut panel = vec![0u8; format.panel_bytes(k)];
        format.pack_panel(&refs, k, &mut panel);
        let acts = Activations::prepare(format.activation(), &x, k);
        for &isa in &isas {
            let mut tile = [[0f32; PANEL]; TILE_ROWS];
            let rows = rows.min(format.tile_rows(isa));
            format.tile(
                isa,
                PanelView::packed(&panel, k),
                &acts,
                RowSpan {
                    first: 0,
                    len: rows,
                },
                TilePlace::MIDDLE,
                &mut tile,
            );
            for r in 0..rows {
                for j in 0..PANEL {
                    let expected: f64 = (0..k)
                        .map(|i| f64::from(xq[r * k + i]) * f64::from(wq[j * k + i]))
                        .sum();
                    let got = f64::from(tile[r][j]);
                    assert!(
                        (got - expected).abs() <= 1e-4 * (1.0 + expected.abs()),
                        "{ty} {isa:?} [{r}][{j}]: {got} vs {expected}"
                    );
                }
            }
        }
    }
}

/// Every K type shares this check (k_panel.rs); a row of 100 weights is not whole super-blocks.
#[test]
#[should_panic(expected = "whole 256-weight super-blocks")]
fn rows_that_are_not_whole_super_blocks_are_refused() {
    let format = format_for(GgmlType::Q4_K).unwrap();
    let mut panel = vec![0u8; 4096];
    format.pack_panel(&[], 100, &mut panel);
}

#[test]
fn a_packed_matrix_row_is_bit_identical_alone_or_in_a_batch() {
    use crate::kernels::matmul::{PackedMatrix, WeightDtype};
    // 40 outputs: the last panel is partial; 300 rows: two row blocks in the full batch.
    let (n, k, m) = (40, 2 * QK_K, 300);
    let w = normal_values(n * k, 24);
    let x = normal_values(m * k, 25);
    for (ty, ..) in k_types() {
        let packed = PackedMatrix::pack(&w, n, k, WeightDtype::of(ty).unwrap());
        let mut all = vec![0f32; m * n];
        packed.matmul(&x, m, &mut all);
        for (row, first) in [(0usize, 0usize), (7, 3), (299, 250)] {
            let rows = row - first + 1;
            let mut part = vec![0f32; rows * n];
            packed.matmul(&x[first * k..(row + 1) * k], rows, &mut part);
            assert_eq!(
                part[(rows - 1) * n..],
                all[row * n..(row + 1) * n],
                "{ty}, row {row}"
            );
        }
        // And the product is the stored weights' product, up to the activations' 8-bit
        // rounding (well under 1% of the sum of the products' magnitudes).
        let mut wq = vec![0f32; n * k];
        for (j, out) in wq.chunks_exact_mut(k).enumerate() {
            packed.row_into(j, out);
        }
        for (r, j) in [(0, 0), (123, 39), (299, 17)] {
            let products = (0..k).map(|i| x[r * k + i] * wq[j * k + i]);
            let expected: f32 = products.clone().sum();
            let scale: f32 = products.map(f32::abs).sum();
            let got = all[r * n + j];
            assert!(
                (got - expected).abs() < 0.01 * scale,
                "{ty}: {got} vs {expected}"
            );
        }
    }
}
