//! Tests of the 32-weight block types beyond the generic format tests: dequantization bit-exact
//! with the `gguf` package, stored blocks read and written unchanged, quantization error bounds,
//! and the tile equal to the f32 product of what is stored.

use super::super::*;
use super::{q4_0, q4_1, q5_0, q5_1, q8_0, LegacyQuant};

use crate::kernels::test_values;

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

/// Every type with its fixture (blocks, reference values) and an RMS error bound relative to
/// the data's RMS for normal-ish weights.
/// A fixture: stored blocks and the reference's f32 values.
type Fixture = (&'static [u8], &'static [u8]);

fn legacy_types() -> [(GgmlType, Fixture, f32); 5] {
    [
        (GgmlType::Q8_0, fixture!("q8_0"), 0.006),
        (GgmlType::Q4_0, fixture!("q4_0"), 0.12),
        (GgmlType::Q4_1, fixture!("q4_1"), 0.10),
        (GgmlType::Q5_0, fixture!("q5_0"), 0.06),
        (GgmlType::Q5_1, fixture!("q5_1"), 0.05),
    ]
}

#[test]
fn dequantization_is_bit_exact_with_the_gguf_reference() {
    for (ty, (blocks, expected), _) in legacy_types() {
        let expected: Vec<f32> = expected
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let mut values = vec![0f32; expected.len()];
        decode(ty, blocks, expected.len(), &mut values).unwrap();
        for (i, (a, b)) in values.iter().zip(&expected).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{ty} value {i}: {a} vs {b}");
        }
    }
}

fn stored_round_trip<Q: LegacyQuant>(blocks: &[u8]) {
    let size = Q::TYPE.block().unwrap().1;
    for block in blocks.chunks_exact(size) {
        let mut again = vec![0u8; size];
        Q::store(&Q::parse(block), &mut again);
        assert_eq!(again, block, "{}", Q::TYPE);
    }
}

#[test]
fn stored_blocks_survive_a_read_and_write_unchanged() {
    let [q8, q40, q41, q50, q51] = legacy_types();
    stored_round_trip::<q8_0::Q80>(q8.1 .0);
    stored_round_trip::<q4_0::Q40>(q40.1 .0);
    stored_round_trip::<q4_1::Q41>(q41.1 .0);
    stored_round_trip::<q5_0::Q50>(q50.1 .0);
    stored_round_trip::<q5_1::Q51>(q51.1 .0);
}

#[test]
fn quantization_error_stays_within_each_types_bound() {
    let k = 4096;
    // A sum of uniforms: bell-shaped like trained weights.
    let a = test_values(k, 21);
    let b = test_values(k, 22);
    let x: Vec<f32> = a.iter().zip(&b).map(|(a, b)| a + b).collect();
    let rms = (x.iter().map(|v| v * v).sum::<f32>() / k as f32).sqrt();
    for (ty, _, bound) in legacy_types() {
        let format = format_for(ty).unwrap();
        let mut stored = vec![0u8; format.row_bytes(k)];
        format.encode_row(&x, &mut stored);
        let mut back = vec![0f32; k];
        format.decode_row(&stored, &mut back);
        let err = (x
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f32>()
            / k as f32)
            .sqrt();
        eprintln!("{ty}: relative RMS error {:.4}", err / rms);
        assert!(err / rms < bound, "{ty}: relative RMS error {}", err / rms);
    }
}

#[test]
fn tile_equals_the_f32_product_of_what_is_stored() {
    let k = 256;
    let w = test_values(PANEL * k, 23);
    let x = test_values(TILE_ROWS * k, 24);
    for (ty, ..) in legacy_types() {
        let format = format_for(ty).unwrap();
        let row_bytes = format.row_bytes(k);
        let mut stored = vec![0u8; PANEL * row_bytes];
        for (dst, src) in stored.chunks_exact_mut(row_bytes).zip(w.chunks_exact(k)) {
            format.encode_row(src, dst);
        }
        let rows: Vec<&[u8]> = stored.chunks_exact(row_bytes).collect();
        let mut panel = vec![0u8; format.panel_bytes(k)];
        format.pack_panel(&rows, k, &mut panel);
        let acts = Activations::prepare(format.activation(), &x, k);
        let mut tile = [[0f32; PANEL]; TILE_ROWS];
        let n = format.tile_rows(Isa::current());
        format.tile(
            Isa::current(),
            PanelView::packed(&panel, k),
            &acts,
            RowSpan { first: 0, len: n },
            TilePlace::MIDDLE,
            &mut tile,
        );
        let mut weights = vec![0f32; k];
        for j in 0..PANEL {
            format.decode_row(rows[j], &mut weights);
            for (r, tile_row) in tile.iter().take(n).enumerate() {
                let exact: f32 = weights
                    .iter()
                    .zip(&x[r * k..][..k])
                    .map(|(a, b)| a * b)
                    .sum();
                // Only the activations' 8-bit rounding separates the two.
                let scale: f32 = x[r * k..][..k].iter().map(|v| v.abs()).sum::<f32>() / 127.0;
                assert!(
                    (tile_row[j] - exact).abs() <= scale * 0.05 + 1e-4,
                    "{ty} ({r}, {j}): {} vs {exact}",
                    tile_row[j]
                );
            }
        }
    }
}
