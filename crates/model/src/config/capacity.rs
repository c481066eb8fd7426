//! A config's sizes are claims: a hostile `config.json` or GGUF header can say 2^32 layers or a
//! hidden size of 2^40 and make the loader allocate per-layer tables or KV pools for them before
//! a single tensor is read. Every config is therefore checked against what its weight files can
//! hold before anything is sized from it: the weights its dimensions imply (a lower bound,
//! computed with checked arithmetic) must fit in the files' bytes at
//! [`MAX_ELEMENTS_PER_BYTE`] weights a byte, the densest any stored format packs.
//!
//! Once a config passes, every product the loader and the KV sizing form from it (a layer's
//! projections, `layers × kv_heads × head_dim`, the embedding) is at most that many weights, so
//! none of them overflows and none asks for more memory than the files' size allows.

use sluice_gguf::MAX_ELEMENTS_PER_BYTE;

/// What a model's weight files can hold: their total size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightCapacity {
    bytes: u64,
}

/// The dimensions a config claims, as read (before any table is built from them).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SizeClaims {
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    /// `(experts, one expert's width)` for a mixture of experts.
    pub experts: Option<(usize, usize)>,
}

impl WeightCapacity {
    /// Weight files of `bytes` bytes in all.
    pub fn of_bytes(bytes: u64) -> Self {
        Self { bytes }
    }

    /// The files' total size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The most weights the files can hold.
    pub fn max_weights(&self) -> u64 {
        self.bytes.saturating_mul(MAX_ELEMENTS_PER_BYTE)
    }

    /// `Ok` when the weights `claims` imply fit in the files; else what is wrong, naming the
    /// figures.
    pub(crate) fn check(&self, claims: &SizeClaims) -> Result<(), String> {
        if claims.hidden == 0 || claims.vocab == 0 {
            return Err(format!(
                "hidden size {} and vocabulary size {} must both be non-zero",
                claims.hidden, claims.vocab
            ));
        }
        let least = claims.least_weights().ok_or_else(|| {
            format!(
                "its dimensions ({}) imply more than 2^64 weights",
                claims.describe()
            )
        })?;
        if least > self.max_weights() {
            return Err(format!(
                "its dimensions ({}) imply at least {least} weights, more than weight files of \
                 {} bytes can hold",
                claims.describe(),
                self.bytes
            ));
        }
        Ok(())
    }
}

impl SizeClaims {
    /// The fewest weights a model of these dimensions has: the embedding (once, even if the
    /// head is tied), and per layer the four attention projections plus the smaller of a dense
    /// MLP and the experts (a mixture may keep some layers dense). `None` past `u64`.
    fn least_weights(&self) -> Option<u64> {
        let n = |v: usize| v as u64;
        let q_dim = n(self.heads).checked_mul(n(self.head_dim))?;
        let kv_dim = n(self.kv_heads).checked_mul(n(self.head_dim))?;
        let attention = q_dim
            .checked_mul(2)?
            .checked_add(kv_dim.checked_mul(2)?)?
            .checked_mul(n(self.hidden))?;
        let dense = n(self.hidden)
            .checked_mul(n(self.intermediate))?
            .checked_mul(3)?;
        let mlp = match self.experts {
            Some((experts, width)) => {
                let sparse = n(self.hidden)
                    .checked_mul(n(width))?
                    .checked_mul(3)?
                    .checked_mul(n(experts))?;
                dense.min(sparse)
            }
            None => dense,
        };
        let per_layer = attention.checked_add(mlp)?;
        n(self.vocab)
            .checked_mul(n(self.hidden))?
            .checked_add(per_layer.checked_mul(n(self.layers))?)
    }

    fn describe(&self) -> String {
        let mut text = format!(
            "{} layers, hidden {}, {} heads of {} ({} for keys and values), MLP {}, vocabulary {}",
            self.layers,
            self.hidden,
            self.heads,
            self.head_dim,
            self.kv_heads,
            self.intermediate,
            self.vocab
        );
        if let Some((experts, width)) = self.experts {
            text.push_str(&format!(", {experts} experts of {width}"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama_like(layers: usize) -> SizeClaims {
        SizeClaims {
            vocab: 32,
            hidden: 8,
            layers,
            heads: 2,
            kv_heads: 1,
            head_dim: 4,
            intermediate: 16,
            experts: None,
        }
    }

    #[test]
    fn a_config_fits_the_files_its_weights_need() {
        // 32·8 + 2·(8·(8 + 8 + 4 + 4) + 3·8·16) = 256 + 2·576.
        let claims = llama_like(2);
        assert_eq!(claims.least_weights(), Some(256 + 2 * 576));
        let exact = (256 + 2 * 576_u64).div_ceil(MAX_ELEMENTS_PER_BYTE);
        assert!(WeightCapacity::of_bytes(exact).check(&claims).is_ok());
        let err = WeightCapacity::of_bytes(exact - 1)
            .check(&claims)
            .unwrap_err();
        assert!(err.contains("at least 1408 weights"), "{err}");
    }

    #[test]
    fn absurd_counts_are_refused_without_overflow() {
        let disk = WeightCapacity::of_bytes(1 << 30);
        for layers in [1 << 32, 1 << 63, usize::MAX] {
            let err = disk.check(&llama_like(layers)).unwrap_err();
            assert!(err.contains(&format!("{layers} layers")), "{err}");
        }
        let wide = SizeClaims {
            hidden: usize::MAX,
            ..llama_like(1)
        };
        assert!(disk.check(&wide).unwrap_err().contains("2^64"));
        let experts = SizeClaims {
            experts: Some((1 << 40, 1 << 20)),
            intermediate: 1 << 40,
            ..llama_like(4)
        };
        assert!(disk.check(&experts).is_err());
        let empty = SizeClaims {
            vocab: 0,
            ..llama_like(1)
        };
        assert!(disk.check(&empty).unwrap_err().contains("non-zero"));
    }
}
