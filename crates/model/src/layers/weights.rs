//! Which format one weight matrix is kept in, and its rows in that format: as stored where the
//! checkpoint's type has a format (a GGUF file's quantized rows are packed as they are),
//! converted where the caller asks for a dtype (`--dtype`, `--quantize`) or the stored type has
//! no format (bf16 is widened to f32).

use std::borrow::Cow;

use sluice_gguf::GgmlType;

use crate::checkpoint::{release_mapped, TensorSource};
use crate::error::LoadError;
use crate::kernels::formats::{format_for, WeightFormat};
use crate::kernels::matmul::{PackedMatrix, WeightDtype};

/// The rows of one matrix encoded in one format.
pub struct EncodedRows<'a> {
    /// The format the rows are encoded in.
    pub format: &'static dyn WeightFormat,
    /// `[out_dim]` rows of `format.row_bytes(in_dim)` bytes.
    pub bytes: Cow<'a, [u8]>,
}

impl Drop for EncodedRows<'_> {
    /// Rows used as mapped have been packed by now: their pages go back (see
    /// [`release_mapped`]).
    fn drop(&mut self) {
        if let Cow::Borrowed(bytes) = self.bytes {
            release_mapped(bytes);
        }
    }
}

/// The format a matrix stored as `stored` with rows of `in_dim` weights is kept in. `dtype`
/// `None` keeps the stored type where its format keeps it (else f32: bf16 is widened). A
/// requested type whose blocks do not divide the rows falls back as llama-quantize does: to
/// q8_0 where 32 divides them, else to f16.
pub fn target_format(
    stored: GgmlType,
    in_dim: usize,
    dtype: Option<WeightDtype>,
) -> &'static dyn WeightFormat {
    let fits = |f: &dyn WeightFormat| in_dim.is_multiple_of(f.block().0);
    let wanted = match dtype {
        Some(d) => d.format(),
        None => format_for(stored)
            .filter(|f| f.kept_as_stored())
            .unwrap_or(WeightDtype::F32.format()),
    };
    if fits(wanted) {
        return wanted;
    }
    match format_for(GgmlType::Q8_0) {
        Some(q8) if fits(q8) => q8,
        _ => WeightDtype::F16.format(),
    }
}

/// Reads `{name}` (`[out_dim, in_dim]`) as rows in the format [`target_format`] picks: the
/// stored bytes themselves when they already are in it, converted otherwise.
pub fn load_rows<'a>(
    source: &'a dyn TensorSource,
    name: &str,
    out_dim: usize,
    in_dim: usize,
    dtype: Option<WeightDtype>,
) -> Result<EncodedRows<'a>, LoadError> {
    let raw = source.raw(name, &[out_dim, in_dim])?;
    let format = target_format(raw.ggml_type, in_dim, dtype);
    if format.ggml_type() == raw.ggml_type {
        return Ok(EncodedRows {
            format,
            bytes: raw.bytes,
        });
    }
    let mapped = match raw.bytes {
        Cow::Borrowed(bytes) => Some(bytes),
        Cow::Owned(_) => None,
    };
    let values = raw.to_f32(name)?;
    mapped.map(release_mapped);
    let row_bytes = format.row_bytes(in_dim);
    let mut bytes = vec![0u8; out_dim * row_bytes];
    {
        use rayon::prelude::*;
        bytes
            .par_chunks_mut(row_bytes.max(1))
            .zip(values.par_chunks(in_dim.max(1)))
            .for_each(|(dst, src)| format.encode_row(src, dst));
    }
    Ok(EncodedRows {
        format,
        bytes: Cow::Owned(bytes),
    })
}

/// Loads `{name}` (`[out_dim, in_dim]`) packed in the format [`target_format`] picks.
pub fn load_matrix(
    source: &dyn TensorSource,
    name: &str,
    out_dim: usize,
    in_dim: usize,
    dtype: Option<WeightDtype>,
) -> Result<PackedMatrix, LoadError> {
    let rows = load_rows(source, name, out_dim, in_dim, dtype)?;
    Ok(PackedMatrix::pack_encoded(
        &rows.bytes,
        out_dim,
        in_dim,
        rows.format,
    ))
}

/// Bytes [`load_matrix`] would hold for a matrix stored as `stored`, without loading it.
pub fn loaded_matrix_bytes(
    stored: GgmlType,
    out_dim: usize,
    in_dim: usize,
    dtype: Option<WeightDtype>,
) -> usize {
    PackedMatrix::packed_bytes(out_dim, in_dim, target_format(stored, in_dim, dtype))
}

/// The dtype the output head gets when every matrix is converted to `dtype`: types below q6_K
/// keep the head in q6_K, as llama-quantize does for every preset below it (the head's
/// rounding shows directly in the next-token distribution, and it is one matrix of many).
pub fn output_head_dtype(dtype: Option<WeightDtype>) -> Option<WeightDtype> {
    let lower = [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
    ];
    match dtype {
        Some(d) if lower.contains(&d.ggml_type()) => WeightDtype::of(GgmlType::Q6_K).or(Some(d)),
        other => other,
    }
}

/// The dtype matrix `name` (a Hugging Face tensor name) is converted to under `dtype`: the
/// output head's ([`output_head_dtype`]) for `lm_head` and for a tied embedding, the stored
/// type for an MoE router ([`is_router`]), else `dtype`.
pub fn matrix_dtype(name: &str, tied: bool, dtype: Option<WeightDtype>) -> Option<WeightDtype> {
    if name == "lm_head.weight" || (tied && name == "model.embed_tokens.weight") {
        output_head_dtype(dtype)
    } else if is_router(name) {
        None
    } else {
        dtype
    }
}

/// Whether `name` is a mixture-of-experts router (`mlp.gate`, Mixtral's `block_sparse_moe.gate`,
/// Qwen2-MoE's `shared_expert_gate`): small matrices whose rounding would change which experts
/// run, kept in their stored type as llama-quantize keeps `ffn_gate_inp`.
pub fn is_router(name: &str) -> bool {
    name.ends_with(".mlp.gate.weight")
        || name.ends_with(".block_sparse_moe.gate.weight")
        || name.ends_with(".shared_expert_gate.weight")
}
