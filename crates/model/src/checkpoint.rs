//! Memory-mapped safetensors checkpoints, single-file or sharded, and the [`TensorSource`]
//! trait every weight source (safetensors, GGUF, generators) implements.
//!
//! The header of each file is parsed here rather than by a library so that a truncated file is
//! reported with the first tensor whose bytes are missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use std::borrow::Cow;

use memmap2::Mmap;
use serde::Deserialize;
use sluice_gguf::{GgmlType, MAX_ELEMENTS_PER_BYTE};

use crate::config::WeightCapacity;
use crate::error::LoadError;
use crate::kernels::formats;

/// A tensor as its source stores it: ggml type, row-major shape (outermost first) and bytes
/// (borrowed from a memory map where the source has one).
#[derive(Debug)]
pub struct RawTensor<'a> {
    /// How the elements are encoded.
    pub ggml_type: GgmlType,
    /// Row-major shape.
    pub shape: Vec<usize>,
    /// The encoded elements, rows back to back.
    pub bytes: Cow<'a, [u8]>,
    /// The file it came from, for error messages.
    pub path: PathBuf,
}

impl RawTensor<'static> {
    /// Owned f32 values (for generated weights).
    pub fn from_f32(values: &[f32], shape: &[usize]) -> Self {
        Self {
            ggml_type: GgmlType::F32,
            shape: shape.to_vec(),
            bytes: Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
            path: PathBuf::from("<generated>"),
        }
    }
}

impl RawTensor<'_> {
    /// Checks the shape against `expected`.
    pub fn check_shape(&self, name: &str, expected: &[usize]) -> Result<(), LoadError> {
        if self.shape != expected {
            return Err(LoadError::WrongShape {
                path: self.path.clone(),
                tensor: name.to_string(),
                expected: expected.to_vec(),
                found: self.shape.clone(),
            });
        }
        Ok(())
    }

    /// The elements as f32 (any type a format can read, and bf16).
    pub fn to_f32(&self, name: &str) -> Result<Vec<f32>, LoadError> {
        let count: usize = self.shape.iter().product();
        let k = self.shape.last().copied().unwrap_or(1);
        let unsupported = || LoadError::UnsupportedDtype {
            path: self.path.clone(),
            tensor: name.to_string(),
            dtype: self.ggml_type.name(),
        };
        let (elems, block_bytes) = self.ggml_type.block().ok_or_else(unsupported)?;
        if k % elems != 0 || self.bytes.len() != count / elems * block_bytes {
            return Err(LoadError::Safetensors {
                path: self.path.clone(),
                message: format!(
                    "tensor `{name}` has {} bytes of {} data, its shape {:?} needs {}",
                    self.bytes.len(),
                    self.ggml_type,
                    self.shape,
                    count / elems.max(1) * block_bytes
                ),
            });
        }
        let mut out = vec![0f32; count];
        formats::decode(self.ggml_type, &self.bytes, k, &mut out).ok_or_else(unsupported)?;
        Ok(out)
    }
}

/// Where weights come from: a checkpoint on disk, or (in benchmarks and tests) a generator.
pub trait TensorSource {
    /// The tensor `name` as stored, checked against `expected_shape` (row-major, outermost
    /// first; generators use it to know what to make).
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError>;

    /// Whether the source holds `name` (for optional tensors such as an untied output head).
    fn contains(&self, name: &str) -> bool;

    /// Whether norm weights that scale by `1 + w` (Gemma's) are stored with the one already
    /// added, as llama.cpp's converter writes them.
    fn norm_weights_include_one(&self) -> bool {
        false
    }

    /// The tensor `name` as row-major f32, checked against `expected_shape`.
    fn tensor(&self, name: &str, expected_shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        self.raw(name, expected_shape)?.to_f32(name)
    }
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
    /// The safetensors files, in the order they were opened.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Opens `model.safetensors.index.json` with its shards, else `model.safetensors`.
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        let mut checkpoint = Self {
            dir: dir.to_path_buf(),
            files: Vec::new(),
            tensors: HashMap::new(),
        };
        for path in shard_paths(dir)? {
            checkpoint.add_file(path)?;
        }
        Ok(checkpoint)
    }

    fn add_file(&mut self, path: PathBuf) -> Result<(), LoadError> {
        let io_err = |source| LoadError::Io {
            path: path.clone(),
            source,
        };
        let file = sluice_gguf::open_regular_file(&path).map_err(io_err)?;
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
                data_start.saturating_add(entry.data_offsets.0),
                data_start.saturating_add(entry.data_offsets.1),
            );
            if start <= end {
                check_size(&entry, end - start)
                    .map_err(|e| invalid(format!("tensor `{name}`: {e}")))?;
            }
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

    /// Every tensor's name, stored type (`None` for a dtype sluice does not read) and shape,
    /// in no particular order.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, Option<GgmlType>, &[usize])> {
        (self.tensors.iter()).map(|(name, t)| (name.as_str(), stored_type(&t.dtype), &t.shape[..]))
    }
}

impl TensorSource for Checkpoint {
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        let entry = self
            .tensors
            .get(name)
            .ok_or_else(|| LoadError::MissingTensor {
                path: self.dir.clone(),
                tensor: name.to_string(),
            })?;
        let file = &self.files[entry.file];
        let ggml_type = stored_type(&entry.dtype).ok_or_else(|| LoadError::UnsupportedDtype {
            path: file.path.clone(),
            tensor: name.to_string(),
            dtype: entry.dtype.clone(),
        })?;
        let raw = RawTensor {
            ggml_type,
            shape: entry.shape.clone(),
            bytes: Cow::Borrowed(&file.bytes[entry.start..entry.end]),
            path: file.path.clone(),
        };
        raw.check_shape(name, expected_shape)?;
        Ok(raw)
    }

    fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

/// The safetensors files of `dir`: the shards `model.safetensors.index.json` names, else
/// `model.safetensors`. A shard must be named as a file of `dir` itself: a hostile index
/// cannot point the loader at other files (`../`, absolute paths).
pub(crate) fn shard_paths(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let index_path = dir.join("model.safetensors.index.json");
    if !index_path.exists() {
        return Ok(vec![dir.join("model.safetensors")]);
    }
    let bytes = sluice_gguf::read_regular_file(&index_path).map_err(|source| LoadError::Io {
        path: index_path.clone(),
        source,
    })?;
    let invalid = |message: String| LoadError::Safetensors {
        path: index_path.clone(),
        message,
    };
    let index: ShardIndex = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    let mut names: Vec<String> = index.weight_map.into_values().collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let plain = Path::new(&name).file_name() == Some(std::ffi::OsStr::new(&name));
            match plain {
                true => Ok(dir.join(name)),
                false => Err(invalid(format!("shard `{name}` is not a file name"))),
            }
        })
        .collect()
}

/// What the safetensors files of `dir` can hold: their size, each opened as a regular file (a
/// missing one is the I/O error loading would give).
pub(crate) fn safetensors_capacity(dir: &Path) -> Result<WeightCapacity, LoadError> {
    let mut bytes = 0u64;
    for path in shard_paths(dir)? {
        let len = sluice_gguf::open_regular_file(&path)
            .and_then(|file| file.metadata())
            .map_err(|source| LoadError::Io { path, source })?
            .len();
        bytes = bytes.saturating_add(len);
    }
    Ok(WeightCapacity::of_bytes(bytes))
}

/// Checks that a header entry's shape fits the `len` bytes its offsets give it: exactly for
/// the dtypes whose size is known, at most 8 elements a byte for any other.
fn check_size(entry: &HeaderEntry, len: usize) -> Result<(), String> {
    let elements = (entry.shape.iter()).try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let size = match entry.dtype.as_str() {
        "F64" | "I64" | "U64" => Some(8),
        "F32" | "I32" | "U32" => Some(4),
        "F16" | "BF16" | "I16" | "U16" => Some(2),
        "I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2" => Some(1),
        _ => None,
    };
    let fits = match (elements, size) {
        (Some(n), Some(size)) => n.checked_mul(size) == Some(len),
        (Some(n), None) => n / MAX_ELEMENTS_PER_BYTE as usize <= len,
        (None, _) => false,
    };
    match fits {
        true => Ok(()),
        false => Err(format!(
            "shape {:?} of {} does not fit the {len} bytes of its data offsets",
            entry.shape, entry.dtype
        )),
    }
}

/// The ggml type of a safetensors dtype sluice reads.
fn stored_type(dtype: &str) -> Option<GgmlType> {
    Some(match dtype {
        "F32" => GgmlType::F32,
        "F16" => GgmlType::F16,
        "BF16" => GgmlType::BF16,
        _ => return None,
    })
}

/// Hands the pages of memory-mapped tensor bytes that lie wholly inside `bytes` back to the
/// kernel once they have been copied out (packed, converted), so a model's resident memory
/// during loading stays near its final size instead of growing by the whole file: the pages
/// stay in the page cache, and a later read faults them back in from the file. For bytes that
/// are not a read-only file mapping (an owned copy) it does nothing harmful: callers pass
/// only borrowed mapped bytes.
pub fn release_mapped(bytes: &[u8]) {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).unwrap_or(4096).max(1);
        let start = (bytes.as_ptr() as usize).next_multiple_of(page);
        let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
        if end > start {
            // SAFETY: [start, end) lies inside `bytes`, a read-only shared file mapping that
            // nothing writes: MADV_DONTNEED only drops this process's pages of it, and the
            // next read maps the file's contents again. A failure changes nothing.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = bytes;
}
