//! The language model of a multimodal checkpoint seen as a text checkpoint: the decoder asks
//! for `model.*` and `lm_head.weight`, and gets the tensors under whichever prefixes the
//! checkpoint keeps its text model at (`gemma3_vision.rs`, `qwen2_5_vl.rs` list theirs).

use crate::checkpoint::{RawTensor, TensorSource};
use crate::error::LoadError;

/// Where one checkpoint layout keeps the text model's `model.*` tensors and its
/// `lm_head.weight`.
#[derive(Debug)]
pub(super) struct TextModelLayout {
    /// Stands for a text checkpoint's `model.`.
    pub model: &'static str,
    /// Stands for a text checkpoint's `lm_head.weight`.
    pub head: &'static str,
}

/// A multimodal checkpoint's text model under a text checkpoint's names.
pub(super) struct TextModel<'a> {
    source: &'a dyn TensorSource,
    layout: &'a TextModelLayout,
}

impl<'a> TextModel<'a> {
    /// `source` in the first of `layouts` (most common first) that holds the text model's
    /// embedding, else the first (whose missing tensors are then named in its names).
    pub fn detect(source: &'a dyn TensorSource, layouts: &'a [TextModelLayout]) -> Self {
        let layout = (layouts.iter())
            .find(|l| source.contains(&format!("{}embed_tokens.weight", l.model)))
            .unwrap_or(&layouts[0]);
        Self { source, layout }
    }

    /// The checkpoint's name of the text checkpoint's tensor `name`.
    fn name(&self, name: &str) -> String {
        match name.strip_prefix("model.") {
            Some(rest) => format!("{}{rest}", self.layout.model),
            None if name == "lm_head.weight" => self.layout.head.to_owned(),
            None => name.to_owned(),
        }
    }
}

impl TensorSource for TextModel<'_> {
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        self.source.raw(&self.name(name), expected_shape)
    }

    fn contains(&self, name: &str) -> bool {
        self.source.contains(&self.name(name))
    }

    fn norm_weights_include_one(&self) -> bool {
        self.source.norm_weights_include_one()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A source that holds only these names (every read fails).
    pub(in crate::architectures) struct Names(pub &'static [&'static str]);

    impl TensorSource for Names {
        fn raw(&self, name: &str, _: &[usize]) -> Result<RawTensor<'_>, LoadError> {
            Err(LoadError::MissingTensor {
                path: Default::default(),
                tensor: name.into(),
            })
        }
        fn contains(&self, name: &str) -> bool {
            self.0.contains(&name)
        }
    }

    /// The names a query layer's weight and the head take in the layout `detect` picks.
    pub(in crate::architectures) fn mapped(
        source: &dyn TensorSource,
        layouts: &[TextModelLayout],
    ) -> [String; 2] {
        let view = TextModel::detect(source, layouts);
        [
            view.name("model.layers.0.self_attn.q_proj.weight"),
            view.name("lm_head.weight"),
        ]
    }
}
