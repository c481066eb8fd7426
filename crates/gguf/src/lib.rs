//! The GGUF file format (llama.cpp's single-file model format): the header, the metadata
//! key-value pairs, the tensor directory and the memory-mapped tensor bytes, for one file or a
//! split set (`name-00001-of-00003.gguf`). Knows nothing about models or tokenizers; the model
//! and text crates read what they need from here.
//!
//! ```text
//! GgufModel::open("m.gguf") ──► metadata() + tensor(name) -> (TensorInfo, &[u8])
//! ```

mod metadata;
mod reader;
mod regular_file;
mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use metadata::{Metadata, MetadataError, Value};
pub use reader::{GgufFile, TensorInfo, MAX_ELEMENTS_PER_BYTE, MAX_METADATA_ITEMS};
pub use regular_file::{open_regular_file, read_regular_file};
pub use types::GgmlType;

/// Why a GGUF file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened or mapped.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a well-formed GGUF file.
    #[error("invalid GGUF file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the offending key or tensor.
        message: String,
    },
}

/// A model stored as one GGUF file or a split set, with one tensor index across the files.
/// Metadata comes from the first file (llama.cpp's `gguf-split` writes it there).
#[derive(Debug)]
pub struct GgufModel {
    files: Vec<GgufFile>,
    /// Tensor name → (file, index in that file's directory).
    index: HashMap<String, (usize, usize)>,
}

impl GgufModel {
    /// Opens `path`; when it is one part of a split set (`-00002-of-00003.gguf`), opens every
    /// part.
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        Self::open_with(path, GgufFile::open)
    }

    /// Opens the headers of `path` and its split parts only (see [`GgufFile::open_header`]):
    /// metadata and tensor directory, for a config, without requiring the data.
    pub fn open_header(path: &Path) -> Result<Self, GgufError> {
        Self::open_with(path, GgufFile::open_header)
    }

    fn open_with(
        path: &Path,
        open: impl Fn(&Path) -> Result<GgufFile, GgufError>,
    ) -> Result<Self, GgufError> {
        let paths = match split_parts(path) {
            Some(parts) => parts,
            None => vec![path.to_path_buf()],
        };
        let files = paths
            .iter()
            .map(|p| open(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut index = HashMap::new();
        for (f, file) in files.iter().enumerate() {
            for (t, tensor) in file.tensors().iter().enumerate() {
                if index.insert(tensor.name.clone(), (f, t)).is_some() {
                    return Err(GgufError::Invalid {
                        path: file.path().to_path_buf(),
                        message: format!("tensor `{}` appears twice", tensor.name),
                    });
                }
            }
        }
        if let Some(expected) = files[0]
            .metadata()
            .u64("split.tensors.count")
            .ok()
            .flatten()
        {
            if expected as usize != index.len() {
                return Err(GgufError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "the split set holds {} tensors, its first part announces {expected}",
                        index.len()
                    ),
                });
            }
        }
        Ok(Self { files, index })
    }

    /// The metadata (of the first file).
    pub fn metadata(&self) -> &Metadata {
        self.files[0].metadata()
    }

    /// The path that was opened first (the first part of a split set).
    pub fn path(&self) -> &Path {
        self.files[0].path()
    }

    /// Every file of the model.
    pub fn files(&self) -> &[GgufFile] {
        &self.files
    }

    /// The tensor `name`'s directory entry, if present.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        let &(f, t) = self.index.get(name)?;
        Some(&self.files[f].tensors()[t])
    }

    /// The tensor `name` with its bytes, if present (and, after
    /// [`GgufModel::open_header`], if its data is in the file).
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let &(f, t) = self.index.get(name)?;
        let file = &self.files[f];
        let info = &file.tensors()[t];
        Some((info, file.tensor_bytes(info)?))
    }

    /// Every tensor, file by file.
    pub fn tensors(&self) -> impl Iterator<Item = &TensorInfo> {
        self.files.iter().flat_map(|f| f.tensors())
    }

    /// Total bytes of all files.
    pub fn file_bytes(&self) -> usize {
        self.files.iter().map(GgufFile::len).sum()
    }
}

/// The parts of a split set that `path` belongs to, in order, or `None` when `path` is not
/// named like a part (`{stem}-NNNNN-of-MMMMM.gguf`).
pub fn split_parts(path: &Path) -> Option<Vec<PathBuf>> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    let (head, count) = stem.rsplit_once("-of-")?;
    let (prefix, number) = head.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(count) || !digits(number) {
        return None;
    }
    let count: usize = count.parse().ok()?;
    let dir = path.parent().unwrap_or(Path::new(""));
    Some(
        (1..=count)
            .map(|i| dir.join(format!("{prefix}-{i:05}-of-{count:05}.gguf")))
            .collect(),
    )
}

/// The name a model file is served under: its stem, without a split suffix
/// (`qwen-q4_k_m-00001-of-00002.gguf` → `qwen-q4_k_m`).
pub fn model_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".gguf").unwrap_or(&name);
    if split_parts(path).is_some() {
        if let Some((head, _)) = stem.rsplit_once("-of-") {
            if let Some((prefix, _)) = head.rsplit_once('-') {
                return prefix.to_string();
            }
        }
    }
    stem.to_string()
}

#[cfg(test)]
mod tests;
