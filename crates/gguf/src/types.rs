//! ggml tensor types as GGUF stores them: the numeric tag, the name llama.cpp prints, and the
//! block geometry that gives a tensor's byte size.

/// A ggml tensor type (`ggml_type` in ggml.h). Only the types sluice can load are named; any
/// other tag stays a number so the error can say which one it was.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// 32 weights: f16 scale, 16 bytes of 4-bit values (offset 8).
    Q4_0,
    /// 32 weights: f16 scale and min, 16 bytes of 4-bit values.
    Q4_1,
    /// 32 weights: f16 scale, 4 bytes of fifth bits, 16 bytes of low nibbles (offset 16).
    Q5_0,
    /// 32 weights: f16 scale and min, fifth bits, low nibbles.
    Q5_1,
    /// 32 weights: f16 scale, 32 signed bytes.
    Q8_0,
    /// 32 weights: f16 scale and f16 `d * sum(q)`, 32 signed bytes (activations only).
    Q8_1,
    /// 256 weights in 16 groups: 2-bit values, 4-bit scales and mins.
    Q2_K,
    /// 256 weights in 16 groups: 3-bit values (2 low bits + high bit mask), 6-bit scales.
    Q3_K,
    /// 256 weights in 8 groups: 4-bit values, 6-bit scales and mins.
    Q4_K,
    /// 256 weights in 8 groups: 5-bit values, 6-bit scales and mins.
    Q5_K,
    /// 256 weights in 16 groups: 6-bit values, 8-bit scales.
    Q6_K,
    /// 256 weights: f32 scale, signed bytes, 16 group sums (activations only).
    Q8_K,
    /// bfloat16.
    BF16,
    /// A tag sluice does not know.
    Other(u32),
}

impl GgmlType {
    /// The type with GGUF tag `tag`.
    pub fn from_tag(tag: u32) -> Self {
        match tag {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            9 => Self::Q8_1,
            10 => Self::Q2_K,
            11 => Self::Q3_K,
            12 => Self::Q4_K,
            13 => Self::Q5_K,
            14 => Self::Q6_K,
            15 => Self::Q8_K,
            30 => Self::BF16,
            other => Self::Other(other),
        }
    }

    /// The GGUF tag.
    pub fn tag(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q8_1 => 9,
            Self::Q2_K => 10,
            Self::Q3_K => 11,
            Self::Q4_K => 12,
            Self::Q5_K => 13,
            Self::Q6_K => 14,
            Self::Q8_K => 15,
            Self::BF16 => 30,
            Self::Other(tag) => tag,
        }
    }

    /// The name llama.cpp uses (`q4_K`, `f16`, ...), or `type N` for an unknown tag.
    pub fn name(self) -> String {
        let known = match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Q4_0 => "q4_0",
            Self::Q4_1 => "q4_1",
            Self::Q5_0 => "q5_0",
            Self::Q5_1 => "q5_1",
            Self::Q8_0 => "q8_0",
            Self::Q8_1 => "q8_1",
            Self::Q2_K => "q2_K",
            Self::Q3_K => "q3_K",
            Self::Q4_K => "q4_K",
            Self::Q5_K => "q5_K",
            Self::Q6_K => "q6_K",
            Self::Q8_K => "q8_K",
            Self::BF16 => "bf16",
            Self::Other(tag) => return format!("type {tag}"),
        };
        known.to_string()
    }

    /// `(elements per block, bytes per block)`, or `None` for an unknown tag.
    pub fn block(self) -> Option<(usize, usize)> {
        Some(match self {
            Self::F32 => (1, 4),
            Self::F16 | Self::BF16 => (1, 2),
            Self::Q4_0 => (32, 18),
            Self::Q4_1 => (32, 20),
            Self::Q5_0 => (32, 22),
            Self::Q5_1 => (32, 24),
            Self::Q8_0 => (32, 34),
            Self::Q8_1 => (32, 36),
            Self::Q2_K => (256, 84),
            Self::Q3_K => (256, 110),
            Self::Q4_K => (256, 144),
            Self::Q5_K => (256, 176),
            Self::Q6_K => (256, 210),
            Self::Q8_K => (256, 292),
            Self::Other(_) => return None,
        })
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}
