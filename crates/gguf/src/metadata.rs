//! GGUF metadata values and typed look-ups over them.

use std::collections::BTreeMap;

/// One metadata value, as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float32`.
    F32(f32),
    /// `float64`.
    F64(f64),
    /// `bool`.
    Bool(bool),
    /// UTF-8 string (invalid UTF-8 is replaced, as llama.cpp reads bytes).
    String(String),
    /// An array of values of one type.
    Array(Vec<Value>),
}

impl Value {
    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float (floats and integers).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// A short name of the stored type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }
}

/// Why a metadata look-up failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetadataError {
    /// The key is absent.
    #[error("metadata key `{0}` is missing")]
    Missing(String),
    /// The key holds another type.
    #[error("metadata key `{key}` holds {found}, expected {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// What the caller asked for.
        expected: &'static str,
        /// What is stored.
        found: &'static str,
    },
}

/// All key-value pairs of a GGUF file, by key.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    values: BTreeMap<String, Value>,
}

impl Metadata {
    /// Wraps parsed pairs.
    pub fn new(values: BTreeMap<String, Value>) -> Self {
        Self { values }
    }

    /// The value at `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// Every key, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        read: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, MetadataError> {
        match self.values.get(key) {
            None => Ok(None),
            Some(value) => read(value).map(Some).ok_or(MetadataError::WrongType {
                key: key.to_string(),
                expected,
                found: value.type_name(),
            }),
        }
    }

    /// An optional non-negative integer.
    pub fn u64(&self, key: &str) -> Result<Option<u64>, MetadataError> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }

    /// An optional float (integers accepted).
    pub fn f64(&self, key: &str) -> Result<Option<f64>, MetadataError> {
        self.typed(key, "a number", Value::as_f64)
    }

    /// An optional bool.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, MetadataError> {
        self.typed(key, "a bool", Value::as_bool)
    }

    /// An optional string.
    pub fn str(&self, key: &str) -> Result<Option<&str>, MetadataError> {
        self.typed(key, "a string", Value::as_str)
    }

    /// An optional array.
    pub fn array(&self, key: &str) -> Result<Option<&[Value]>, MetadataError> {
        self.typed(key, "an array", Value::as_array)
    }

    /// A required non-negative integer.
    pub fn require_u64(&self, key: &str) -> Result<u64, MetadataError> {
        self.u64(key)?
            .ok_or_else(|| MetadataError::Missing(key.to_string()))
    }

    /// A required string.
    pub fn require_str(&self, key: &str) -> Result<&str, MetadataError> {
        self.str(key)?
            .ok_or_else(|| MetadataError::Missing(key.to_string()))
    }

    /// An optional array of strings.
    pub fn str_array(&self, key: &str) -> Result<Option<Vec<&str>>, MetadataError> {
        self.typed(key, "an array of strings", |v| {
            v.as_array()?.iter().map(Value::as_str).collect()
        })
    }

    /// An optional array of numbers, as f32.
    pub fn f32_array(&self, key: &str) -> Result<Option<Vec<f32>>, MetadataError> {
        self.typed(key, "an array of numbers", |v| {
            v.as_array()?
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect()
        })
    }

    /// An optional array of integers, as i64.
    pub fn i64_array(&self, key: &str) -> Result<Option<Vec<i64>>, MetadataError> {
        self.typed(key, "an array of integers", |v| {
            v.as_array()?.iter().map(Value::as_i64).collect()
        })
    }
}
