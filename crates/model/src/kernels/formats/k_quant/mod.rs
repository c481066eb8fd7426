//! What the K-quant types (Q2_K … Q6_K) share: a weight is `d·scale·level − dmin·min` or
//! `d·scale·(level − centre)` with an unsigned integer `level`, an integer `scale` (and `min`)
//! per sub-block of 16 or 32 weights and f32 `d` (and `dmin`) per super-block of 256. Each type
//! file (`q2_k.rs` … `q6_k.rs`) only says how its stored block maps to that form ([`KQuant`]);
//! the panel layout and dequantization are written once (`layout.rs`), the quantizer search
//! once (`quantize.rs`), the [`WeightFormat`] implementation and the choice of tile kernel
//! here, and the kernels once per instruction set: `portable.rs` (the bit-exact reference, with
//! the kernels' arithmetic and its bounds), `avx2.rs`, `avx512.rs` (VNNI), `amx.rs` (AMX tiles,
//! over panels expanded for them).

use std::marker::PhantomData;

use sluice_gguf::GgmlType;

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod layout;
mod portable;
mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;
mod quantize;
#[cfg(test)]
mod tests;

use super::act_q8k::{BlockQ8K, Q8KRows, QK_K};
use super::{
    ActivationKind, Activations, Isa, PanelForm, PanelView, RowSpan, Tile, TilePlace, WeightFormat,
    AMX_MIN_ROWS, PANEL, TILE_ROWS, VECTOR_TILE_ROWS,
};
use layout::{read_cell_row, write_cell, CELL_OUTPUTS};
pub(super) use layout::{KBlock, Offset, Scheme};
pub(super) use q2_k::Q2_K;
pub(super) use q3_k::Q3_K;
pub(super) use q4_k::Q4_K;
pub(super) use q5_k::Q5_K;
pub(super) use q6_k::Q6_K;

/// One K-quant type: how its stored 256-weight block reads and writes the shared form.
pub(super) trait KQuant: 'static {
    /// The ggml type.
    const TYPE: GgmlType;
    /// Its weights' shape.
    const SCHEME: Scheme;
    /// Reads one stored block.
    fn parse(block: &[u8]) -> KBlock;
    /// Writes one block in the stored form.
    fn store(block: &KBlock, out: &mut [u8]);
    /// Quantizes 256 weights.
    fn quantize(x: &[f32]) -> KBlock;
}

/// The [`WeightFormat`] of a K-quant type.
pub(super) struct KFormat<Q>(PhantomData<fn() -> Q>);

impl<Q> KFormat<Q> {
    pub const NEW: Self = KFormat(PhantomData);
}

impl<Q: KQuant> std::fmt::Debug for KFormat<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KFormat({})", Q::TYPE)
    }
}

fn block_bytes<Q: KQuant>() -> usize {
    Q::TYPE.block().expect("K-quant types have a block").1
}

fn assert_whole_blocks(ty: GgmlType, k: usize) {
    assert!(
        k.is_multiple_of(QK_K),
        "{ty} rows hold whole 256-weight super-blocks, got {k} weights"
    );
}

impl<Q: KQuant> WeightFormat for KFormat<Q> {
    fn ggml_type(&self) -> GgmlType {
        Q::TYPE
    }

    fn panel_bytes(&self, k: usize) -> usize {
        2 * (k / QK_K) * Q::SCHEME.cell_bytes()
    }

    fn activation(&self) -> ActivationKind {
        ActivationKind::Q8K
    }

    fn encode_row(&self, src: &[f32], dst: &mut [u8]) {
        assert_whole_blocks(Q::TYPE, src.len());
        for (x, out) in src
            .chunks_exact(QK_K)
            .zip(dst.chunks_exact_mut(block_bytes::<Q>()))
        {
            Q::store(&Q::quantize(x), out);
        }
    }

    fn decode_row(&self, src: &[u8], dst: &mut [f32]) {
        for (block, out) in src
            .chunks_exact(block_bytes::<Q>())
            .zip(dst.chunks_exact_mut(QK_K))
        {
            Q::parse(block).dequantize(&Q::SCHEME, out);
        }
    }

    fn pack_panel(&self, rows: &[&[u8]], k: usize, panel: &mut [u8]) {
        assert_whole_blocks(Q::TYPE, k);
        assert!(rows.len() <= PANEL, "a panel holds at most {PANEL} rows");
        let (scheme, bytes) = (Q::SCHEME, block_bytes::<Q>());
        let cells = panel.chunks_exact_mut(scheme.cell_bytes());
        let mut blocks = vec![KBlock::ZERO; PANEL];
        for (i, cell) in cells.enumerate() {
            let (b, half) = (i / 2, i % 2);
            if half == 0 {
                for (block, row) in blocks.iter_mut().zip(rows) {
                    *block = Q::parse(&row[b * bytes..][..bytes]);
                }
            }
            let outputs = &blocks[half * CELL_OUTPUTS..][..CELL_OUTPUTS];
            let present = rows.len().saturating_sub(half * CELL_OUTPUTS);
            write_cell(&scheme, &outputs[..present.min(CELL_OUTPUTS)], cell);
        }
    }

    fn unpack_row(&self, panel: &[u8], k: usize, j: usize, out: &mut [f32]) {
        let scheme = Q::SCHEME;
        let (half, jj) = (j / CELL_OUTPUTS, j % CELL_OUTPUTS);
        for (b, chunk) in out[..k].chunks_exact_mut(QK_K).enumerate() {
            let cell = &panel[(2 * b + half) * scheme.cell_bytes()..][..scheme.cell_bytes()];
            read_cell_row(&scheme, cell, jj).dequantize(&scheme, chunk);
        }
    }

    fn tile_rows(&self, isa: Isa) -> usize {
        isa.integer_tile_rows()
    }

    fn expand_min_rows(&self, _isa: Isa) -> usize {
        AMX_MIN_ROWS
    }

    fn expanded_bytes(&self, isa: Isa, k: usize) -> usize {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Amx => k / QK_K * amx::expanded_block_bytes(&Q::SCHEME),
            _ => 0,
        }
    }

    fn expand_panel(&self, isa: Isa, panel: &[u8], k: usize, out: &mut [u8]) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Amx` is only detected with avx2+fma+avx512f+vl; `expand` checks
            // the lengths.
            Isa::Amx => unsafe { amx::expand::<Q>(panel, k / QK_K, out) },
            _ => panic!("{self:?} panels expand only for AMX, not {isa:?}"),
        }
    }

    fn tile(
        &self,
        isa: Isa,
        panel: PanelView<'_>,
        x: &Activations<'_>,
        rows: RowSpan,
        place: TilePlace,
        tile: &mut Tile,
    ) {
        let Activations::Q8K(x) = x else {
            panic!("{} multiplies Q8_K activations", Q::TYPE);
        };
        if panel.form == PanelForm::Expanded {
            assert_eq!(isa, Isa::Amx, "{self:?} panels expand only for AMX");
            return amx_tile::<Q>(panel.bytes, panel.k, x, rows, tile);
        }
        kernel_tile::<Q>(isa, panel.bytes, panel.k, x, rows, place, tile)
    }
}

/// One tile against a K-quant panel expanded for AMX.
fn amx_tile<Q: KQuant>(panel: &[u8], k: usize, x: &Q8KRows, rows: RowSpan, tile: &mut Tile) {
    let blocks = k / QK_K;
    let xs: [&[BlockQ8K]; TILE_ROWS] = std::array::from_fn(|r| match r < rows.len {
        true => &x.row(rows.first + r)[..blocks],
        false => &[],
    });
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `Isa::Amx` (asserted by the caller) is only detected with avx512f+vnni+vl and
    // the tile permission; the rows are one `Q8KRows`', equally spaced.
    unsafe {
        amx::tile::<Q>(panel, blocks, &xs[..rows.len], tile)
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("AMX is x86-64 only: {xs:?} {panel:?} {tile:?}")
}

/// One tile against a packed K-quant panel of `k` weights a row, rows `rows` of `x`.
fn kernel_tile<Q: KQuant>(
    isa: Isa,
    panel: &[u8],
    k: usize,
    x: &Q8KRows,
    rows: RowSpan,
    place: TilePlace,
    tile: &mut Tile,
) {
    let (r0, rows) = (rows.first, rows.len);
    assert!(rows <= isa.integer_tile_rows(), "{rows} rows in one tile");
    let blocks = k / QK_K;
    let prefetch = place.prefetch(panel.len());
    let panel = &panel[..2 * blocks * Q::SCHEME.cell_bytes()];
    let mut xs: [&[BlockQ8K]; TILE_ROWS] = [&[]; TILE_ROWS];
    for (r, row) in xs.iter_mut().enumerate().take(rows) {
        *row = &x.row(r0 + r)[..blocks];
    }
    let xs = &xs[..rows];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only detected on CPUs with avx2+fma; the panel holds
        // `2 * blocks` cells and every row `blocks` super-blocks.
        Isa::Avx2 => unsafe { avx2::tile::<Q>(panel, blocks, xs, prefetch, tile) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, and `Isa::Avx512Vnni` is only detected with avx512vnni+vl.
        Isa::Avx512Vnni => unsafe { avx512::tile::<Q>(panel, blocks, xs, prefetch, tile) },
        #[cfg(target_arch = "x86_64")]
        // Packed panels (few rows a panel) run as VNNI tiles of at most 8 rows.
        Isa::Amx => {
            let mut part = [[0f32; PANEL]; TILE_ROWS];
            for (first, chunk) in xs.chunks(VECTOR_TILE_ROWS).enumerate() {
                // SAFETY: as for `Isa::Avx512Vnni`; `Isa::Amx` implies its features.
                unsafe { avx512::tile::<Q>(panel, blocks, chunk, prefetch, &mut part) };
                let at = first * VECTOR_TILE_ROWS;
                tile[at..at + chunk.len()].copy_from_slice(&part[..chunk.len()]);
            }
        }
        _ => portable::tile::<Q>(panel, blocks, xs, tile),
    }
}
