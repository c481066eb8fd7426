//! The tile-level vocabulary shared by the product's driver ([`super::matmul`]) and the weight
//! formats' kernels ([`super::formats`]): a panel's width, a tile's rows, how a panel handed to a
//! kernel is laid out and where a tile falls among its panel's tiles. Both depend on this module;
//! it depends on neither.

/// Output features per packed panel (two 8-lane vectors).
pub const PANEL: usize = 16;
/// Most rows of `x` one micro-kernel call handles (an AMX tile's 16); each format says how many
/// its kernel takes (`WeightFormat::tile_rows`), [`DEFAULT_TILE_ROWS`] unless it has registers
/// (or tiles) for more.
pub const TILE_ROWS: usize = 16;
/// Rows of `x` a micro-kernel call handles unless its format says otherwise.
pub const DEFAULT_TILE_ROWS: usize = 6;

/// One tile of results: `tile[r][j]` for up to [`TILE_ROWS`] rows and the [`PANEL`] outputs of
/// a panel.
pub type Tile = [[f32; PANEL]; TILE_ROWS];

/// How the bytes of a panel handed to `WeightFormat::tile` are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelForm {
    /// As packed at load.
    Packed,
    /// As `WeightFormat::expand_panel` wrote it.
    Expanded,
}

/// Where a tile falls among the row tiles one task runs against a panel: the first waits on
/// memory for the panel (its kernel may prefetch ahead of its reads); the last may warm the
/// panel stored after it, which the task (or the other thread) reads next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePlace {
    /// The panel is not in cache yet.
    pub first: bool,
    /// No later tile reads this panel in this task.
    pub last: bool,
}

/// What a kernel prefetches while it runs a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefetch {
    /// Nothing: the panel is in cache, or the hardware prefetcher keeps up.
    Nothing,
    /// Its own panel, a few cells ahead of its reads.
    Ahead,
    /// The panel stored after its own, this many bytes on, cell by cell as it reads its own.
    Next(usize),
}

impl TilePlace {
    /// The only tile of its panel.
    pub const ALONE: TilePlace = TilePlace {
        first: true,
        last: true,
    };
    /// A tile between the first and the last.
    pub const MIDDLE: TilePlace = TilePlace {
        first: false,
        last: false,
    };

    /// The first tile streams its panel (`panel_len` bytes); the last warms the next.
    pub(crate) fn prefetch(self, panel_len: usize) -> Prefetch {
        match (self.first, self.last) {
            (true, _) => Prefetch::Ahead,
            (false, true) => Prefetch::Next(panel_len),
            (false, false) => Prefetch::Nothing,
        }
    }
}

/// A panel as one tile reads it: its bytes, the weights each of its rows holds, and their form.
#[derive(Debug, Clone, Copy)]
pub struct PanelView<'a> {
    /// The panel's bytes, packed or expanded as `form` says.
    pub bytes: &'a [u8],
    /// Weights a row (`k`, the product's inner dimension).
    pub k: usize,
    /// How `bytes` are laid out.
    pub form: PanelForm,
}

impl<'a> PanelView<'a> {
    /// A panel as packed at load.
    pub fn packed(bytes: &'a [u8], k: usize) -> Self {
        Self {
            bytes,
            k,
            form: PanelForm::Packed,
        }
    }
}

/// The activation rows one tile multiplies: `first..first + len`, `len` at most the format's
/// `tile_rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowSpan {
    /// The first row.
    pub first: usize,
    /// Rows in the tile.
    pub len: usize,
}
