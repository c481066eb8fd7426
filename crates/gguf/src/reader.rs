//! The byte-level GGUF reader: header, metadata pairs and tensor directory, checked against the
//! file's length before anything is allocated, so a hostile or truncated file is an error, never a
//! panic or a huge allocation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::metadata::{Metadata, Value};
use crate::types::GgmlType;
use crate::GgufError;

/// `GGUF` read as a little-endian u32.
const MAGIC: &[u8; 4] = b"GGUF";
/// Data alignment when `general.alignment` is absent.
const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a ggml tensor has.
const MAX_DIMS: u32 = 4;
/// Deepest nesting of arrays accepted (GGUF writers produce at most 1).
const MAX_ARRAY_DEPTH: usize = 4;
/// Most array items all metadata arrays together may hold. Each item becomes a [`Value`] of 32
/// bytes however small it is in the file (a `u8` is one byte there), so this bounds the
/// metadata's memory at 512 MiB plus its strings' bytes. Real files hold a few per token
/// (text, score, type, merges): Gemma 3's 262,144-token vocabulary needs about 800,000.
pub const MAX_METADATA_ITEMS: u64 = 1 << 24;
/// Most weights a byte of file holds: no ggml type packs more than 8 (the smallest, IQ1_S,
/// stores 1.56 bits a weight). A tensor that claims more elements than this many per byte
/// of its file cannot be there, whatever its type (unknown types too).
pub const MAX_ELEMENTS_PER_BYTE: u64 = 8;

/// One tensor's entry in the directory.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions as ggml orders them: `dims[0]` is the innermost (contiguous) one, so a
    /// `[rows, cols]` matrix is stored as `dims = [cols, rows]`.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ggml_type: GgmlType,
    /// Absolute byte range in the file.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
}

impl TensorInfo {
    /// The shape in row-major order (outermost first), as safetensors and PyTorch write it.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Number of elements (at most [`MAX_ELEMENTS_PER_BYTE`] times the file's length, checked
    /// when the directory was read, so the product does not overflow).
    pub fn elements(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }
}

/// One memory-mapped GGUF file.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    bytes: Mmap,
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
}

impl GgufFile {
    /// Maps and parses `path`, checking that every tensor's data lies inside the file.
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let file = Self::open_header(path)?;
        let len = file.bytes.len();
        if let Some(cut) = file
            .tensors
            .iter()
            .filter(|t| t.end > len)
            .min_by_key(|t| t.start)
        {
            return Err(GgufError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "truncated: tensor `{}` needs bytes up to {}, file has {len}",
                    cut.name, cut.end
                ),
            });
        }
        Ok(file)
    }

    /// Maps and parses the header of `path` (metadata and tensor directory) without checking
    /// that the tensors' data is all there: enough to read a config, and cheap.
    pub fn open_header(path: &Path) -> Result<Self, GgufError> {
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = crate::open_regular_file(path).map_err(io)?;
        // SAFETY: read-only mapping; like every mmap-based loader we assume the file is not
        // modified while it is loaded.
        let bytes = unsafe { Mmap::map(&file) }.map_err(io)?;
        let (version, metadata, tensors) = parse(&bytes).map_err(|message| GgufError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            bytes,
            version,
            metadata,
            tensors,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The metadata pairs.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensor directory, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The stored bytes of `tensor` (an entry of this file's directory); `None` when the file
    /// ends before them (only possible after [`GgufFile::open_header`]).
    pub fn tensor_bytes(&self, tensor: &TensorInfo) -> Option<&[u8]> {
        self.bytes.get(tensor.start..tensor.end)
    }

    /// Length of the file in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the file is empty (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A cursor over the header bytes; every read checks the remaining length.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Array items the metadata may still hold (see [`MAX_METADATA_ITEMS`]).
    items_left: u64,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| {
            format!(
                "file ends inside the header ({what} at byte {} needs {n} bytes, file has {})",
                self.at,
                self.bytes.len()
            )
        })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items of at least `min_item_bytes` each, refused when the rest of the file
    /// could not hold them (so a corrupt count never allocates).
    fn count(&mut self, what: &str, min_item_bytes: usize) -> Result<usize, String> {
        let count = self.u64(what)?;
        let left = (self.bytes.len() - self.at) as u64;
        if count.saturating_mul(min_item_bytes as u64) > left {
            return Err(format!(
                "{what} is {count}, more than the {left} bytes left in the file can hold"
            ));
        }
        Ok(count as usize)
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let len = self.count(what, 1)?;
        Ok(String::from_utf8_lossy(self.take(len, what)?).into_owned())
    }

    fn value(&mut self, tag: u32, key: &str, depth: usize) -> Result<Value, String> {
        Ok(match tag {
            0 => Value::U8(self.array::<1>(key)?[0]),
            1 => Value::I8(self.array::<1>(key)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            4 => Value::U32(self.u32(key)?),
            5 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            7 => match self.array::<1>(key)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => return Err(format!("metadata `{key}`: bool byte {other}")),
            },
            8 => Value::String(self.string(key)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(format!("metadata `{key}`: arrays nested too deep"));
                }
                let item_tag = self.u32(key)?;
                let min = match item_tag {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8..=12 => 8,
                    other => return Err(format!("metadata `{key}`: unknown value type {other}")),
                };
                let count = self.count(key, min)?;
                self.items_left = (self.items_left.checked_sub(count as u64)).ok_or_else(|| {
                    format!(
                        "metadata `{key}`: arrays hold more than {MAX_METADATA_ITEMS} items in all"
                    )
                })?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(self.value(item_tag, key, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64(key)?),
            11 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            other => return Err(format!("metadata `{key}`: unknown value type {other}")),
        })
    }
}

type Parsed = (u32, Metadata, Vec<TensorInfo>);

fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    let mut cur = Cursor {
        bytes,
        at: 0,
        items_left: MAX_METADATA_ITEMS,
    };
    let magic = cur
        .take(4, "magic")
        .map_err(|_| "not a GGUF file (shorter than 4 bytes)")?;
    if magic != MAGIC {
        return Err(format!(
            "not a GGUF file (starts with {magic:02x?}, expected `GGUF`)"
        ));
    }
    let version = cur.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(format!(
            "GGUF version {version} is not supported (2 and 3 are)"
        ));
    }
    // A tensor entry takes at least 8 (name length) + 4 + 8 + 4 + 8 bytes; a pair 8 + 4 + 1.
    let tensor_count = cur.count("tensor count", 32)?;
    let kv_count = cur.count("metadata count", 13)?;
    let mut values = BTreeMap::new();
    for _ in 0..kv_count {
        let key = cur.string("metadata key")?;
        let tag = cur.u32(&key)?;
        let value = cur.value(tag, &key, 0)?;
        values.insert(key, value);
    }
    let metadata = Metadata::new(values);
    let alignment = metadata
        .u64("general.alignment")
        .map_err(|e| e.to_string())?
        .unwrap_or(DEFAULT_ALIGNMENT);
    if alignment == 0 || !alignment.is_power_of_two() {
        return Err(format!(
            "general.alignment {alignment} is not a power of two"
        ));
    }
    let mut raw = Vec::with_capacity(tensor_count);
    for _ in 0..tensor_count {
        let name = cur.string("tensor name")?;
        let n_dims = cur.u32(&name)?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(format!("tensor `{name}` has {n_dims} dimensions"));
        }
        let dims = (0..n_dims)
            .map(|_| cur.u64(&name))
            .collect::<Result<Vec<_>, _>>()?;
        let ggml_type = GgmlType::from_tag(cur.u32(&name)?);
        let offset = cur.u64(&name)?;
        raw.push((name, dims, ggml_type, offset));
    }
    let data_start = (cur.at as u64).next_multiple_of(alignment);
    let mut tensors = Vec::with_capacity(raw.len());
    let max_elements = (bytes.len() as u64).saturating_mul(MAX_ELEMENTS_PER_BYTE);
    for (name, dims, ggml_type, offset) in raw {
        let size = tensor_size(&name, &dims, ggml_type, max_elements)?;
        let start = data_start
            .checked_add(offset)
            .filter(|_| offset.is_multiple_of(alignment))
            .ok_or_else(|| format!("tensor `{name}` has a misaligned offset {offset}"))?;
        let end = start.saturating_add(size).min(usize::MAX as u64);
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            start: start as usize,
            end: end as usize,
        });
    }
    Ok((version, metadata, tensors))
}

/// Bytes a tensor of `dims` and `ggml_type` holds; unknown types are sized when they are used,
/// so here they only need a valid offset (size 0). Any tensor of more than `max_elements`
/// elements is refused (see [`MAX_ELEMENTS_PER_BYTE`]).
fn tensor_size(
    name: &str,
    dims: &[u64],
    ggml_type: GgmlType,
    max_elements: u64,
) -> Result<u64, String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= max_elements)
        .ok_or_else(|| {
            format!(
                "tensor `{name}` has dimensions {dims:?}, more elements than a file of {} \
                 bytes can hold",
                max_elements / MAX_ELEMENTS_PER_BYTE
            )
        })?;
    let Some((block_elems, block_bytes)) = ggml_type.block() else {
        return Ok(0);
    };
    if !dims[0].is_multiple_of(block_elems as u64) {
        return Err(format!(
            "tensor `{name}` of type {ggml_type} has rows of {} elements, not whole blocks of {block_elems}",
            dims[0]
        ));
    }
    Ok(elements / block_elems as u64 * block_bytes as u64)
}
