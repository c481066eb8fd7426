//! A GGUF writer for tests that need hostile files: reads a real file (a fixture) into its
//! metadata pairs and tensors, lets the test change any of them, and writes GGUF v3 bytes back
//! (the tensors' data laid out afresh at the file's alignment).

#![allow(dead_code)] // each test file uses its own part of this

use std::path::Path;

use sluice_gguf::{GgufModel, Value};

/// One tensor: directory entry and data.
#[derive(Clone)]
pub struct Tensor {
    /// Its name.
    pub name: String,
    /// ggml dimensions, innermost first.
    pub dims: Vec<u64>,
    /// ggml type tag.
    pub tag: u32,
    /// Its bytes.
    pub data: Vec<u8>,
    /// Added to the offset the writer computes (0: data where the directory says).
    pub offset_shift: u64,
}

/// A GGUF file being edited.
#[derive(Clone)]
pub struct GgufWriter {
    /// Metadata pairs in file order.
    pub pairs: Vec<(String, Value)>,
    /// Tensors in file order.
    pub tensors: Vec<Tensor>,
}

impl GgufWriter {
    /// The pairs and tensors of the (single) GGUF file at `path`.
    pub fn read(path: &Path) -> Self {
        let model = GgufModel::open(path).unwrap();
        let meta = model.metadata();
        let pairs = meta
            .keys()
            .map(|k| (k.to_string(), meta.get(k).unwrap().clone()))
            .collect();
        let tensors = model
            .tensors()
            .map(|info| Tensor {
                name: info.name.clone(),
                dims: info.dims.clone(),
                tag: info.ggml_type.tag(),
                data: model.tensor(&info.name).unwrap().1.to_vec(),
                offset_shift: 0,
            })
            .collect();
        Self { pairs, tensors }
    }

    /// Sets `key` (replacing it where it is, else appending it).
    pub fn set(&mut self, key: &str, value: Value) -> &mut Self {
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.pairs.push((key.to_string(), value)),
        }
        self
    }

    /// The value at `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let alignment = self
            .get("general.alignment")
            .and_then(Value::as_u64)
            .filter(|a| a.is_power_of_two())
            .unwrap_or(32);
        let align = |n: usize| n.next_multiple_of(alignment as usize);
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.pairs.len() as u64).to_le_bytes());
        for (key, value) in &self.pairs {
            string(&mut out, key);
            out.extend(tag(value).to_le_bytes());
            encode(&mut out, value);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            string(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            t.dims.iter().for_each(|d| out.extend(d.to_le_bytes()));
            out.extend(t.tag.to_le_bytes());
            out.extend(offset.wrapping_add(t.offset_shift).to_le_bytes());
            offset += align(t.data.len()) as u64;
        }
        out.resize(align(out.len()), 0);
        for t in &self.tensors {
            out.extend(&t.data);
            out.resize(align(out.len()), 0);
        }
        out
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.bytes()).unwrap();
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// The GGUF type tag of `value`.
pub fn tag(value: &Value) -> u32 {
    match value {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn encode(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.extend(v.to_le_bytes()),
        Value::U16(v) => out.extend(v.to_le_bytes()),
        Value::I16(v) => out.extend(v.to_le_bytes()),
        Value::U32(v) => out.extend(v.to_le_bytes()),
        Value::I32(v) => out.extend(v.to_le_bytes()),
        Value::F32(v) => out.extend(v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            // An empty array keeps a type of its own: u8.
            out.extend(items.first().map_or(0, tag).to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            items.iter().for_each(|item| encode(out, item));
        }
        Value::U64(v) => out.extend(v.to_le_bytes()),
        Value::I64(v) => out.extend(v.to_le_bytes()),
        Value::F64(v) => out.extend(v.to_le_bytes()),
    }
}
