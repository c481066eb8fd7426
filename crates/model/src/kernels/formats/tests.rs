//! Properties every weight format must have, run over every registered format.

use super::*;
use crate::kernels::test_values;

/// Every ggml type that has a format.
fn formats() -> Vec<&'static dyn WeightFormat> {
    (0..64)
        .filter_map(|tag| format_for(GgmlType::from_tag(tag)))
        .collect()
}

/// A row length every format accepts (whole blocks of 32 and of 256).
const K: usize = 512;

fn packed_panel(format: &dyn WeightFormat, w: &[f32], rows: usize) -> Vec<u8> {
    packed_panel_of(format, w, rows, K)
}

/// `rows` rows of `k` weights from `w`, encoded and packed into one panel.
fn packed_panel_of(format: &dyn WeightFormat, w: &[f32], rows: usize, k: usize) -> Vec<u8> {
    let row_bytes = format.row_bytes(k);
    let mut encoded = vec![0u8; rows * row_bytes];
    for (dst, src) in encoded.chunks_exact_mut(row_bytes).zip(w.chunks_exact(k)) {
        format.encode_row(src, dst);
    }
    let row_refs: Vec<&[u8]> = encoded.chunks_exact(row_bytes).collect();
    let mut panel = vec![0u8; format.panel_bytes(k)];
    format.pack_panel(&row_refs, k, &mut panel);
    panel
}

/// Every place a tile can take among its panel's tiles.
const PLACES: [TilePlace; 4] = [
    TilePlace::ALONE,
    TilePlace::MIDDLE,
    TilePlace {
        first: true,
        last: false,
    },
    TilePlace {
        first: false,
        last: true,
    },
];

/// One tile of `len` rows from row `first`: `format.tile` on a fresh tile.
fn run_tile(
    format: &dyn WeightFormat,
    isa: Isa,
    panel: PanelView<'_>,
    acts: &Activations<'_>,
    (first, len): (usize, usize),
    place: TilePlace,
) -> Tile {
    let mut tile = [[0f32; PANEL]; TILE_ROWS];
    format.tile(isa, panel, acts, RowSpan { first, len }, place, &mut tile);
    tile
}

#[test]
fn every_available_kernel_agrees_bit_for_bit_with_the_portable_one() {
    let w = test_values(PANEL * K, 5);
    let x = test_values(TILE_ROWS * K, 6);
    let isas = Isa::tested("the format kernels");
    for format in formats() {
        let panel = packed_panel(format, &w, PANEL);
        let acts = Activations::prepare(format.activation(), &x, K);
        for &isa in &isas {
            for rows in 1..=format.tile_rows(isa) {
                // Where the tile falls (what it prefetches) changes no bit.
                let place = PLACES[rows % PLACES.len()];
                let fast = run_tile(
                    format,
                    isa,
                    PanelView::packed(&panel, K),
                    &acts,
                    (0, rows),
                    place,
                );
                let portable = run_tile(
                    format,
                    Isa::Portable,
                    PanelView::packed(&panel, K),
                    &acts,
                    (0, rows),
                    TilePlace::MIDDLE,
                );
                assert_eq!(
                    fast,
                    portable,
                    "{:?} {isa:?}, {rows} rows",
                    format.ggml_type()
                );
            }
        }
    }
}

#[test]
fn a_row_gives_the_same_bits_in_any_tile_position() {
    let w = test_values(PANEL * K, 7);
    let x = test_values(TILE_ROWS * K, 8);
    for format in formats() {
        let panel = packed_panel(format, &w, PANEL);
        let acts = Activations::prepare(format.activation(), &x, K);
        let rows = format.tile_rows(Isa::current());
        let first = TilePlace {
            first: true,
            last: false,
        };
        let full = run_tile(
            format,
            Isa::current(),
            PanelView::packed(&panel, K),
            &acts,
            (0, rows),
            first,
        );
        for (r0, expected) in full.iter().take(rows).enumerate() {
            let place = TilePlace::ALONE;
            let alone = run_tile(
                format,
                Isa::current(),
                PanelView::packed(&panel, K),
                &acts,
                (r0, 1),
                place,
            );
            assert_eq!(&alone[0], expected, "{:?}, row {r0}", format.ggml_type());
        }
    }
}

#[test]
fn unpacked_rows_equal_decoded_stored_rows() {
    let w = test_values(5 * K, 9);
    for format in formats() {
        let panel = packed_panel(format, &w, 5);
        let row_bytes = format.row_bytes(K);
        for j in 0..5 {
            let mut stored = vec![0u8; row_bytes];
            format.encode_row(&w[j * K..][..K], &mut stored);
            let (mut decoded, mut unpacked) = (vec![0f32; K], vec![0f32; K]);
            format.decode_row(&stored, &mut decoded);
            format.unpack_row(&panel, K, j, &mut unpacked);
            assert_eq!(decoded, unpacked, "{:?}, row {j}", format.ggml_type());
        }
        // Missing rows of a partial panel read as zeros.
        let mut zero = vec![1f32; K];
        format.unpack_row(&panel, K, 7, &mut zero);
        assert!(zero.iter().all(|&v| v == 0.0), "{:?}", format.ggml_type());
    }
}

#[test]
fn float_formats_round_trip_their_own_precision() {
    let w = test_values(K, 10);
    for (ty, tol) in [(GgmlType::F32, 0.0), (GgmlType::F16, 1e-3)] {
        let format = format_for(ty).unwrap();
        let mut stored = vec![0u8; format.row_bytes(K)];
        format.encode_row(&w, &mut stored);
        let mut back = vec![0f32; K];
        format.decode_row(&stored, &mut back);
        for (a, b) in w.iter().zip(&back) {
            assert!((a - b).abs() <= tol, "{ty}: {a} vs {b}");
        }
    }
}

#[test]
fn bf16_rows_are_read_but_kept_only_when_asked() {
    let format = format_for(GgmlType::BF16).unwrap();
    let bytes = [
        half::bf16::from_f32(1.5).to_le_bytes(),
        half::bf16::from_f32(-2.0).to_le_bytes(),
    ]
    .concat();
    let mut out = [0f32; 2];
    decode(GgmlType::BF16, &bytes, 2, &mut out).unwrap();
    assert_eq!(out, [1.5, -2.0]);
    assert!(decode(GgmlType::Other(99), &bytes, 2, &mut out).is_none());
    // No dtype asked: widened to f32 (bf16 arithmetic rounds the activations); asked: kept.
    use crate::layers::weights::target_format;
    use crate::WeightDtype;
    assert_eq!(
        target_format(GgmlType::BF16, 64, None).ggml_type(),
        GgmlType::F32
    );
    let asked = target_format(GgmlType::F16, 64, Some(WeightDtype::BF16));
    assert_eq!(asked.ggml_type(), GgmlType::BF16);
    assert!(!format.kept_as_stored());
    assert_eq!(
        target_format(GgmlType::F16, 64, None).ggml_type(),
        GgmlType::F16
    );
}

/// The bf16 products against a plain statement of the order (`vdpbf16ps` as Intel defines it:
/// exact products, the odd element's added first, denormals read and written as zero), on values
/// that reach denormal products and sums, and an odd `k`.
#[test]
fn bf16_products_follow_the_pair_order() {
    let format = format_for(GgmlType::BF16).unwrap();
    let k = 45;
    let mut w = test_values(PANEL * k, 31);
    // Two groups of activation rows, so a tile may cross from one to the next.
    let mut x = test_values(2 * TILE_ROWS * k, 32);
    // Magnitudes over 2^±11, so sums round and the order shows.
    for (i, v) in w.iter_mut().enumerate() {
        *v *= 2f32.powi((i % 23) as i32 - 11);
    }
    // Output 3 and row 2 tiny: their products and sums fall near and below f32's smallest
    // normal, where they are flushed to zero.
    w[3 * k..4 * k].iter_mut().for_each(|v| *v *= 1e-19);
    x[2 * k..3 * k].iter_mut().for_each(|v| *v *= 1e-19);
    let panel = packed_panel_of(format, &w, PANEL, k);
    let acts = Activations::prepare(format.activation(), &x, k);
    let widen = |v: f32| {
        let b = half::bf16::from_f32(v).to_f32();
        if b.is_subnormal() {
            0.0
        } else {
            b
        }
    };
    let flush = |v: f32| {
        if v.is_subnormal() {
            0.0 * v.signum()
        } else {
            v
        }
    };
    for isa in Isa::tested("the bf16 format") {
        for (first, rows) in [(0, 1), (0, 7), (0, TILE_ROWS), (9, 12), (17, 3)] {
            let view = PanelView::packed(&panel, k);
            let tile = run_tile(format, isa, view, &acts, (first, rows), TilePlace::ALONE);
            for r in 0..rows {
                for j in 0..PANEL {
                    let (xr, wj) = (&x[(first + r) * k..][..k], &w[j * k..][..k]);
                    let mut acc = 0f32;
                    for c in (0..k).step_by(2) {
                        if c + 1 < k {
                            acc = flush(widen(xr[c + 1]).mul_add(widen(wj[c + 1]), acc));
                        } else {
                            acc = flush(0f32.mul_add(0.0, acc));
                        }
                        acc = flush(widen(xr[c]).mul_add(widen(wj[c]), acc));
                    }
                    let at = format!("{isa:?}, tile at {first}, row {r}, output {j}");
                    assert_eq!(tile[r][j].to_bits(), acc.to_bits(), "{at}");
                }
            }
        }
    }
}

#[test]
fn an_expanded_panel_gives_the_bits_of_the_packed_one() {
    let w = test_values(PANEL * K, 11);
    // Two rows more than a tile, so tiles may start past the first row.
    let x = test_values((TILE_ROWS + 2) * K, 12);
    let mut expanded_any = false;
    let isas = Isa::tested("the expanded panels");
    for format in formats() {
        let panel = packed_panel(format, &w, PANEL);
        let acts = Activations::prepare(format.activation(), &x, K);
        for &isa in &isas {
            let bytes = format.expanded_bytes(isa, K);
            if bytes == 0 {
                continue;
            }
            expanded_any = true;
            let mut expanded = vec![0u8; bytes];
            format.expand_panel(isa, &panel, K, &mut expanded);
            for rows in 1..=format.tile_rows(isa) {
                let place = PLACES[rows % PLACES.len()];
                let first = rows % 3;
                let packed_tile = run_tile(
                    format,
                    isa,
                    PanelView::packed(&panel, K),
                    &acts,
                    (first, rows),
                    place,
                );
                let form = PanelForm::Expanded;
                let expanded_tile = run_tile(
                    format,
                    isa,
                    PanelView {
                        bytes: &expanded,
                        k: K,
                        form,
                    },
                    &acts,
                    (first, rows),
                    place,
                );
                let ty = format.ggml_type();
                assert_eq!(packed_tile, expanded_tile, "{ty:?} {isa:?}, {rows} rows");
            }
        }
    }
    // Where the CPU has a kernel that expands, the test must have reached it.
    let vnni = Isa::available().contains(&Isa::Avx512Vnni);
    assert_eq!(
        expanded_any, vnni,
        "the VNNI legacy kernels expand (and on AMX the K-quant ones), no other"
    );
}
