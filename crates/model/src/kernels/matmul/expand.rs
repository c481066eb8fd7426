//! Expanded panels: where a format has a form its kernel reads faster than the packed one
//! (`WeightFormat::expand_panel`) and enough row tiles share a panel to repay the pass
//! (prefill), each panel is expanded once into a per-thread buffer and its tiles read that.

use super::super::isa::Isa;
use super::super::tile::{PanelForm, PanelView};
use super::PackedMatrix;

impl PackedMatrix {
    /// Whether the tiles of `rows` rows read expanded panels: where the format has an
    /// expanded form and enough row tiles share each panel to repay the pass (prefill).
    pub(super) fn expands(&self, isa: Isa, rows: usize) -> bool {
        rows >= self.format.expand_min_rows(isa) && self.format.expanded_bytes(isa, self.in_dim) > 0
    }

    /// Panel `p` as the tiles of `rows` rows should read it: expanded into `scratch` where
    /// [`PackedMatrix::expands`], else packed.
    pub(super) fn panel_for<'a>(
        &'a self,
        isa: Isa,
        p: usize,
        rows: usize,
        scratch: &'a mut Vec<u8>,
    ) -> PanelView<'a> {
        let k = self.in_dim;
        if !self.expands(isa, rows) {
            return PanelView::packed(self.panel(p), k);
        }
        scratch.resize(self.format.expanded_bytes(isa, k), 0);
        self.format.expand_panel(isa, self.panel(p), k, scratch);
        PanelView {
            bytes: scratch,
            k,
            form: PanelForm::Expanded,
        }
    }
}

thread_local! {
    /// Each thread's buffers for expanded panels, one per level of nesting.
    static SCRATCH: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with a buffer of this thread's that no enclosing call is using (taken out of the
/// thread's pool while `f` runs, so nested calls each get their own), or with an empty one
/// when the buffer is not `needed` (decode: no thread-local access per panel).
pub(super) fn with_scratch<T>(needed: bool, f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    if !needed {
        return f(&mut Vec::new());
    }
    let mut buffer = SCRATCH
        .with_borrow_mut(|pool| pool.pop())
        .unwrap_or_default();
    let result = f(&mut buffer);
    SCRATCH.with_borrow_mut(|pool| pool.push(buffer));
    result
}
