//! Memory-mapped safetensors checkpoints, single-file or sharded, read as f32.
//!
//! The header of each file is parsed here rather than by a library so that a truncated file is
//! reported with the first tensor whose bytes are missing.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use memmap2::Mmap;
use serde::Deserialize;

use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::{WeightDtype, PANEL};

/// Where weights come from: a checkpoint on disk, or (in benchmarks and tests) a generator.
pub trait TensorSource {
    /// The tensor `name` as row-major f32, checked against `expected_shape`.
    fn tensor(&self, name: &str, expected_shape: &[usize]) -> Result<Vec<f32>, LoadError>;

    /// Whether the source holds `name` (for optional tensors such as an untied output head).
    fn contains(&self, name: &str) -> bool;
}

/// One tensor's place in a file.
#[derive(Debug)]
struct TensorEntry {
    file: usize,
    dtype: String,
    shape: Vec<usize>,
    /// Absolute byte range in the file.
    start: usize,
    end: usize,
}

/// A mapped safetensors file.
#[derive(Debug)]
struct MappedFile {
    path: PathBuf,
    bytes: Mmap,
}

/// The safetensors files of a model directory with a name → location index.
#[derive(Debug)]
pub struct Checkpoint {
    dir: PathBuf,
    files: Vec<MappedFile>,
    tensors: HashMap<String, TensorEntry>,
}

#[derive(Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

#[derive(Deserialize)]
struct HeaderEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

impl Checkpoint {
    /// Opens `model.safetensors.index.json` with its shards, else `model.safetensors`.
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        let index_path = dir.join("model.safetensors.index.json");
        let file_names: Vec<String> = if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(|source| LoadError::Io {
                path: index_path.clone(),
                source,
            })?;
            let index: ShardIndex =
                serde_json::from_str(&text).map_err(|e| LoadError::Safetensors {
                    path: index_path.clone(),
                    message: e.to_string(),
                })?;
            let mut names: Vec<String> = index.weight_map.into_values().collect();
            names.sort();
            names.dedup();
            names
        } else {
            vec!["model.safetensors".to_string()]
        };
        let mut checkpoint = Self {
            dir: dir.to_path_buf(),
            files: Vec::new(),
            tensors: HashMap::new(),
        };
        for name in file_names {
            checkpoint.add_file(dir.join(name))?;
        }
        Ok(checkpoint)
    }

    fn add_file(&mut self, path: PathBuf) -> Result<(), LoadError> {
        let io_err = |source| LoadError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io_err)?;
        // SAFETY: the mapping is read-only; like every mmap-based loader we assume the file is
        // not modified while the model is loaded.
        let bytes = unsafe { Mmap::map(&file) }.map_err(io_err)?;
        let invalid = |message: String| LoadError::Safetensors {
            path: path.clone(),
            message,
        };
        let header_len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
            .ok_or_else(|| invalid("file is shorter than the 8-byte header length".into()))?;
        let header = bytes
            .get(8..8usize.saturating_add(header_len))
            .ok_or_else(|| invalid(format!("header of {header_len} bytes runs past the end")))?;
        let entries: HashMap<String, serde_json::Value> =
            serde_json::from_slice(header).map_err(|e| invalid(format!("bad header: {e}")))?;
        let data_start = 8 + header_len;
        let file_index = self.files.len();
        let mut parsed = Vec::new();
        for (name, value) in entries {
            if name == "__metadata__" {
                continue;
            }
            let entry: HeaderEntry = serde_json::from_value(value)
                .map_err(|e| invalid(format!("bad header entry `{name}`: {e}")))?;
            let (start, end) = (
                data_start + entry.data_offsets.0,
                data_start + entry.data_offsets.1,
            );
            parsed.push((name, entry.dtype, entry.shape, start, end));
        }
        // Report the earliest cut-off tensor, so the message is stable.
        parsed.sort_by_key(|p| p.3);
        for (name, dtype, shape, start, end) in parsed {
            if end > bytes.len() || start > end {
                return Err(LoadError::Truncated {
                    path: path.clone(),
                    tensor: name,
                    needed: end,
                    len: bytes.len(),
                });
            }
            self.tensors.insert(
                name,
                TensorEntry {
                    file: file_index,
                    dtype,
                    shape,
                    start,
                    end,
                },
            );
        }
        self.files.push(MappedFile { path, bytes });
        Ok(())
    }

    /// Bytes the weights of this checkpoint hold once loaded as `dtype`, without loading them:
    /// matrices packed into whole panels of [`PANEL`] rows of `dtype`, vectors (norms, biases)
    /// as f32, nothing for an `lm_head.weight` that a tied `config` ignores. Projections stacked
    /// at load share their padding, so this is exact or a little over.
    pub fn loaded_bytes(&self, config: &ModelConfig, dtype: WeightDtype) -> usize {
        let element = match dtype {
            WeightDtype::F32 => 4,
            WeightDtype::F16 => 2,
        };
        self.tensors
            .iter()
            .filter(|(name, _)| !(config.tie_word_embeddings && *name == "lm_head.weight"))
            .map(|(_, t)| match t.shape.as_slice() {
                [rows, cols] => rows.div_ceil(PANEL) * PANEL * cols * element,
                shape => shape.iter().product::<usize>() * 4,
            })
            .sum()
    }
}

impl TensorSource for Checkpoint {
    fn tensor(&self, name: &str, expected_shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let entry = self
            .tensors
            .get(name)
            .ok_or_else(|| LoadError::MissingTensor {
                path: self.dir.clone(),
                tensor: name.to_string(),
            })?;
        let file = &self.files[entry.file];
        if entry.shape != expected_shape {
            return Err(LoadError::WrongShape {
                path: file.path.clone(),
                tensor: name.to_string(),
                expected: expected_shape.to_vec(),
                found: entry.shape.clone(),
            });
        }
        let bytes = &file.bytes[entry.start..entry.end];
        let count: usize = expected_shape.iter().product();
        let element_size = match entry.dtype.as_str() {
            "F32" => 4,
            "F16" | "BF16" => 2,
            other => {
                return Err(LoadError::UnsupportedDtype {
                    path: file.path.clone(),
                    tensor: name.to_string(),
                    dtype: other.to_string(),
                })
            }
        };
        if bytes.len() != count * element_size {
            return Err(LoadError::Safetensors {
                path: file.path.clone(),
                message: format!(
                    "tensor `{name}` has {} bytes of data, its shape needs {}",
                    bytes.len(),
                    count * element_size
                ),
            });
        }
        // Bytes may be unaligned in the file, so decode element by element.
        Ok(match entry.dtype.as_str() {
            "F32" => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            "F16" => bytes
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            _ => bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        })
    }

    fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}
