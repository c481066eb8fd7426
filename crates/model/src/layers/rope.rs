//! Rotary position embeddings in the "rotate half" layout Hugging Face Llama-family models use:
//! feature `i` pairs with `i + rotary_dim/2`, over the first `rotary_dim` features of a head
//! (all of them unless `partial_rotary_factor` says fewer; the rest pass through unchanged).
//!
//! LongRoPE (Phi-3) keeps two sets of frequencies and picks one per sequence: the long set once
//! the sequence's own length (its tokens in the cache after this step) exceeds the original
//! training length. transformers makes the same choice from the length of the input it is given,
//! so a prompt prefilled in one call and the same prompt fed in pieces differ once a piece
//! crosses the threshold (keys already cached keep the rotation they were written with, in
//! transformers' generation as here). The choice never looks at other sequences in the step, so
//! a sequence's logits stay the same alone or batched.

use crate::batch::Batch;
use crate::config::{RopeConfig, RopeScaling};

/// Per-layer-independent rotary parameters.
#[derive(Debug)]
pub struct Rope {
    /// `[rotary_dim / 2]` inverse frequencies, after any scaling (LongRoPE: the short set).
    inv_freq: Vec<f32>,
    /// LongRoPE: the frequencies of sequences longer than the given length.
    long: Option<(usize, Vec<f32>)>,
    /// Multiplier of cos and sin (LongRoPE's attention factor), when not 1.
    scale: Option<f32>,
    head_dim: usize,
}

/// cos/sin for every token of a batch: `[num_tokens, rotary_dim / 2]` each.
#[derive(Debug)]
pub struct RopeTables {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
    head_dim: usize,
}

impl Rope {
    /// Frequencies for heads of `head_dim` features.
    pub fn new(config: &RopeConfig, head_dim: usize) -> Self {
        let dim = config.rotary_dim.unwrap_or(head_dim);
        let base: Vec<f64> = (0..dim / 2)
            .map(|i| 1.0 / config.theta.powf((2 * i) as f64 / dim as f64))
            .collect();
        let divided = |factors: &[f32]| -> Vec<f64> {
            (base.iter())
                .zip(factors.iter().chain(std::iter::repeat(&1.0)))
                .map(|(f, &d)| f / d as f64)
                .collect()
        };
        let (mut long, mut scale) = (None, None);
        let inv_freq = match &config.scaling {
            RopeScaling::Default => base.clone(),
            &RopeScaling::Linear { factor } => base.iter().map(|f| f / factor).collect(),
            RopeScaling::FreqFactors(factors) => divided(factors),
            RopeScaling::LongRope(params) => {
                long = Some((
                    params.original_max_position_embeddings,
                    to_f32(divided(&params.long_factor)),
                ));
                scale = Some(params.attention_factor).filter(|&s| s != 1.0);
                divided(&params.short_factor)
            }
            &RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: original,
            } => {
                let low_freq_wavelen = original / low_freq_factor;
                let high_freq_wavelen = original / high_freq_factor;
                (base.iter())
                    .map(|&f| {
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        if wavelen < high_freq_wavelen {
                            f
                        } else if wavelen > low_freq_wavelen {
                            f / factor
                        } else {
                            let smooth = (original / wavelen - low_freq_factor)
                                / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect()
            }
        };
        Self {
            inv_freq: to_f32(inv_freq),
            long,
            scale,
            head_dim,
        }
    }

    /// cos/sin tables for the batch's tokens, each sequence's from the frequencies its own
    /// length selects. The angle is computed in f32, as transformers does.
    pub fn tables(&self, batch: &Batch) -> RopeTables {
        let half = self.inv_freq.len();
        let t = batch.num_tokens();
        let (mut cos, mut sin) = (vec![0f32; t * half], vec![0f32; t * half]);
        for seq in &batch.seqs {
            let inv_freq = match &self.long {
                Some((original, long)) if seq.context_len > *original => long,
                _ => &self.inv_freq,
            };
            let range = seq.token_start * half..(seq.token_start + seq.num_tokens) * half;
            let positions = &batch.positions[seq.token_start..][..seq.num_tokens];
            let rows = cos[range.clone()].chunks_exact_mut(half);
            for ((c, s), &p) in rows.zip(sin[range].chunks_exact_mut(half)).zip(positions) {
                for ((c, s), &f) in c.iter_mut().zip(s.iter_mut()).zip(inv_freq) {
                    let angle = p as f32 * f;
                    (*c, *s) = match self.scale {
                        Some(scale) => (angle.cos() * scale, angle.sin() * scale),
                        None => (angle.cos(), angle.sin()),
                    };
                }
            }
        }
        RopeTables {
            cos,
            sin,
            half,
            head_dim: self.head_dim,
        }
    }
}

fn to_f32(values: Vec<f64>) -> Vec<f32> {
    values.into_iter().map(|f| f as f32).collect()
}

impl RopeTables {
    /// Rotates `x: [num_tokens, heads, head_dim]` in place, token `t` by its table row.
    pub fn apply(&self, x: &mut [f32], heads: usize) {
        let half = self.half;
        for (t, token) in x.chunks_exact_mut(heads * self.head_dim).enumerate() {
            let cos = &self.cos[t * half..][..half];
            let sin = &self.sin[t * half..][..half];
            for head in token.chunks_exact_mut(self.head_dim) {
                let (a, b) = head[..2 * half].split_at_mut(half);
                for i in 0..half {
                    let (x1, x2) = (a[i], b[i]);
                    a[i] = x1 * cos[i] - x2 * sin[i];
                    b[i] = x2 * cos[i] + x1 * sin[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LongRope;

    /// A batch of one sequence with one token at `position`.
    fn one_token(position: usize) -> Batch {
        let mut batch = Batch::default();
        batch.push_sequence(&[0], position, vec![0; position + 1], 1, true);
        batch
    }

    fn longrope(rotary_dim: Option<usize>) -> Rope {
        let config = RopeConfig {
            theta: 10000.0,
            scaling: RopeScaling::LongRope(LongRope {
                short_factor: vec![1.0, 2.0],
                long_factor: vec![4.0, 8.0],
                original_max_position_embeddings: 8,
                attention_factor: 1.5,
            }),
            rotary_dim,
        };
        Rope::new(&config, 4)
    }

    #[test]
    fn longrope_switches_to_long_factors_past_the_original_length_per_sequence() {
        let rope = longrope(None);
        // Two sequences in one step: one of 8 tokens (short), one of 9 (long), both at
        // position 7 for their last token.
        let mut batch = Batch::default();
        batch.push_sequence(&[0], 7, vec![0; 8], 1, true);
        batch.push_sequence(&[0, 0], 7, vec![0; 9], 1, true);
        let tables = rope.tables(&batch);
        let short = 7.0f32 * (1.0 / 1.0);
        let long = 7.0f32 * (1.0 / 4.0);
        assert_eq!(tables.cos[0], short.cos() * 1.5);
        assert_eq!(tables.cos[2], long.cos() * 1.5);
        // Alone, the short sequence gets the same row as in the mixed step.
        assert_eq!(rope.tables(&one_token(7)).cos[..2], tables.cos[..2]);
    }

    #[test]
    fn partial_rotary_leaves_the_trailing_features_alone() {
        let rope = longrope(Some(2));
        assert_eq!(rope.inv_freq.len(), 1);
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        rope.tables(&one_token(3)).apply(&mut x, 1);
        assert_eq!(x[2..], [3.0, 4.0]);
        let (c, s) = (3f32.cos() * 1.5, 3f32.sin() * 1.5);
        assert_eq!(x[..2], [c - 2.0 * s, 2.0 * c + s]);
    }

    #[test]
    fn position_zero_is_the_identity() {
        let rope = Rope::new(
            &RopeConfig {
                theta: 10000.0,
                scaling: RopeScaling::Default,
                rotary_dim: None,
            },
            4,
        );
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        rope.tables(&one_token(0)).apply(&mut x, 1);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn llama3_scaling_divides_low_frequencies_and_keeps_high_ones() {
        let plain = Rope::new(
            &RopeConfig {
                theta: 500000.0,
                scaling: RopeScaling::Default,
                rotary_dim: None,
            },
            16,
        );
        let scaled = Rope::new(
            &RopeConfig {
                theta: 500000.0,
                scaling: RopeScaling::Llama3 {
                    factor: 8.0,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_max_position_embeddings: 32.0,
                },
                rotary_dim: None,
            },
            16,
        );
        assert_eq!(scaled.inv_freq[0], plain.inv_freq[0]);
        let last = plain.inv_freq.len() - 1;
        assert!((scaled.inv_freq[last] - plain.inv_freq[last] / 8.0).abs() < 1e-12);
    }
}
