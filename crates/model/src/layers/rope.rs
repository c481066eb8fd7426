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
//!
//! Multimodal RoPE (Qwen2-VL, Qwen2.5-VL's `mrope_section`) gives each token three positions,
//! temporal, height and width (`Batch::mrope_positions`), and splits the frequency pairs into
//! three consecutive runs: pair `i` of the first run turns by the temporal position, of the
//! second by the height, of the third by the width, as transformers' `recomposition_frequencies`
//! lays out its cos/sin. A token whose three positions are equal (text) gets exactly plain RoPE's
//! angles, and a batch without 3-D positions takes the plain path's values for every token.

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
    /// Multimodal RoPE: `[rotary_dim / 2]`, which of a token's `[temporal, height, width]`
    /// positions turns each frequency pair; `None` for one position.
    mrope_axes: Option<Vec<usize>>,
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
        let mrope_axes = config.mrope_section.map(|section| {
            (section.iter().enumerate())
                .flat_map(|(axis, &run)| std::iter::repeat_n(axis, run))
                .collect()
        });
        Self {
            inv_freq: to_f32(inv_freq),
            long,
            scale,
            mrope_axes,
            head_dim,
        }
    }

    /// cos/sin tables for the batch's tokens, each sequence's from the frequencies its own
    /// length selects, and under multimodal RoPE each pair from its axis's position
    /// (`batch.mrope_positions`, when the batch has them). The angle is computed in f32, as
    /// transformers does.
    pub fn tables(&self, batch: &Batch) -> RopeTables {
        let half = self.inv_freq.len();
        let t = batch.num_tokens();
        let (mut cos, mut sin) = (vec![0f32; t * half], vec![0f32; t * half]);
        let mrope = (self.mrope_axes.as_deref()).filter(|_| !batch.mrope_positions.is_empty());
        for seq in &batch.seqs {
            let inv_freq = match &self.long {
                Some((original, long)) if seq.context_len > *original => long,
                _ => &self.inv_freq,
            };
            let tokens = seq.token_start..seq.token_start + seq.num_tokens;
            let range = tokens.start * half..tokens.end * half;
            let rows = cos[range.clone()].chunks_exact_mut(half);
            for ((c, s), t) in rows.zip(sin[range].chunks_exact_mut(half)).zip(tokens) {
                let p = batch.positions[t];
                for (i, ((c, s), &f)) in c.iter_mut().zip(s.iter_mut()).zip(inv_freq).enumerate() {
                    let p = mrope.map_or(p, |axes| batch.mrope_positions[t][axes[i]]);
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
            mrope_section: None,
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

    fn plain_config(rotary_dim: Option<usize>) -> RopeConfig {
        RopeConfig {
            theta: 10000.0,
            scaling: RopeScaling::Default,
            rotary_dim,
            mrope_section: None,
        }
    }

    /// Qwen2.5-VL's layout on 24-feature heads: 12 pairs as 2 temporal, 4 height, 6 width; the
    /// last 4 features unrotated when `rotary_dim` is 24 of 28.
    fn mrope(head_dim: usize) -> Rope {
        let config = RopeConfig {
            mrope_section: Some([2, 4, 6]),
            ..plain_config(Some(24).filter(|_| head_dim != 24))
        };
        Rope::new(&config, head_dim)
    }

    /// Two sequences: positions 5..8 and 0..2.
    fn two_sequences() -> Batch {
        let mut batch = Batch::default();
        batch.push_sequence(&[0; 3], 5, vec![0, 1], 4, true);
        batch.push_sequence(&[0; 2], 0, vec![2], 4, true);
        batch
    }

    /// `x: [tokens, heads, head_dim]` of varied values.
    fn features(tokens: usize, heads: usize, head_dim: usize) -> Vec<f32> {
        (0..tokens * heads * head_dim)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect()
    }

    #[test]
    fn mrope_with_equal_components_is_plain_rope_bit_for_bit() {
        for head_dim in [24, 28] {
            let rotary_dim = Some(24).filter(|_| head_dim != 24);
            let plain = Rope::new(&plain_config(rotary_dim), head_dim);
            let mrope = mrope(head_dim);
            let mut batch = two_sequences();
            let reference = plain.tables(&batch);
            // No 3-D positions in the batch, then each row's given as `[p, p, p]`.
            let without = mrope.tables(&batch);
            batch.set_mrope_positions(0, &[]);
            assert_eq!(
                batch.mrope_positions,
                [[5; 3], [6; 3], [7; 3], [0; 3], [1; 3]]
            );
            let with = mrope.tables(&batch);
            for tables in [&without, &with] {
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&tables.cos), bits(&reference.cos));
                assert_eq!(bits(&tables.sin), bits(&reference.sin));
                let (mut a, mut b) = (features(5, 2, head_dim), features(5, 2, head_dim));
                reference.apply(&mut a, 2);
                tables.apply(&mut b, 2);
                assert_eq!(bits(&a), bits(&b));
            }
            // A text model ignores 3-D positions.
            batch.mrope_positions[0] = [1, 2, 3];
            assert_eq!(plain.tables(&batch).cos, reference.cos);
        }
    }

    /// transformers' `Qwen2_5_VLRotaryEmbedding` and `apply_rotary_pos_emb`, written out: the
    /// angles of all three components for every pair, the pairs' runs taken from the temporal,
    /// height and width angles in turn (`recomposition_frequencies`), doubled to the head, and
    /// `q · cos + rotate_half(q) · sin`.
    fn transformers_mrope(
        x: &[f32],
        heads: usize,
        head_dim: usize,
        positions: &[[u32; 3]],
        inv_freq: &[f32],
        section: [usize; 3],
    ) -> Vec<f32> {
        let half = inv_freq.len();
        let mut out = x.to_vec();
        for (t, position) in positions.iter().enumerate() {
            let freqs: Vec<Vec<f32>> = (position.iter())
                .map(|&p| inv_freq.iter().map(|&f| p as f32 * f).collect())
                .collect();
            let mut recomposed = Vec::new();
            let mut start = 0;
            for (axis, &run) in section.iter().enumerate() {
                recomposed.extend_from_slice(&freqs[axis][start..start + run]);
                start += run;
            }
            let emb: Vec<f32> = recomposed.iter().chain(&recomposed).copied().collect();
            for head in 0..heads {
                let q = &x[(t * heads + head) * head_dim..][..head_dim];
                let o = &mut out[(t * heads + head) * head_dim..][..head_dim];
                for d in 0..2 * half {
                    let rotated = if d < half { -q[d + half] } else { q[d - half] };
                    o[d] = q[d] * emb[d].cos() + rotated * emb[d].sin();
                }
            }
        }
        out
    }

    #[test]
    fn mrope_rotates_each_pair_by_its_sections_component_as_transformers_does() {
        for head_dim in [24, 28] {
            let rope = mrope(head_dim);
            let mut batch = two_sequences();
            let positions = [[5, 5, 5], [6, 7, 9], [6, 8, 7], [0, 0, 0], [1, 0, 3]];
            batch.set_mrope_positions(0, &positions);
            let x = features(5, 3, head_dim);
            let mut ours = x.clone();
            rope.tables(&batch).apply(&mut ours, 3);
            let expected =
                transformers_mrope(&x, 3, head_dim, &positions, &rope.inv_freq, [2, 4, 6]);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ours), bits(&expected), "head_dim {head_dim}");
        }
    }

    #[test]
    fn position_zero_is_the_identity() {
        let rope = Rope::new(
            &RopeConfig {
                theta: 10000.0,
                scaling: RopeScaling::Default,
                rotary_dim: None,
                mrope_section: None,
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
                mrope_section: None,
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
                mrope_section: None,
            },
            16,
        );
        assert_eq!(scaled.inv_freq[0], plain.inv_freq[0]);
        let last = plain.inv_freq.len() - 1;
        assert!((scaled.inv_freq[last] - plain.inv_freq[last] / 8.0).abs() < 1e-12);
    }
}
