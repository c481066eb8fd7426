//! Rotary position embeddings in the "rotate half" layout Hugging Face Llama-family models use:
//! feature `i` pairs with `i + head_dim/2`.

use crate::config::{RopeConfig, RopeScaling};

/// Per-layer-independent rotary parameters.
#[derive(Debug)]
pub struct Rope {
    /// `[head_dim / 2]` inverse frequencies, after any scaling.
    inv_freq: Vec<f32>,
}

/// cos/sin for every token of a batch: `[num_tokens, head_dim / 2]` each.
#[derive(Debug)]
pub struct RopeTables {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl Rope {
    /// Frequencies for heads of `head_dim` features.
    pub fn new(config: &RopeConfig, head_dim: usize) -> Self {
        let base: Vec<f64> = (0..head_dim / 2)
            .map(|i| 1.0 / config.theta.powf((2 * i) as f64 / head_dim as f64))
            .collect();
        let inv_freq = match &config.scaling {
            RopeScaling::Default => base,
            &RopeScaling::Linear { factor } => base.into_iter().map(|f| f / factor).collect(),
            RopeScaling::FreqFactors(factors) => base
                .into_iter()
                .zip(factors.iter().chain(std::iter::repeat(&1.0)))
                .map(|(f, &d)| f / d as f64)
                .collect(),
            &RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: original,
            } => {
                let low_freq_wavelen = original / low_freq_factor;
                let high_freq_wavelen = original / high_freq_factor;
                base.into_iter()
                    .map(|f| {
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
            inv_freq: inv_freq.into_iter().map(|f| f as f32).collect(),
        }
    }

    /// cos/sin tables for `positions`. The angle is computed in f32, as transformers does.
    pub fn tables(&self, positions: &[u32]) -> RopeTables {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &p in positions {
            for &f in &self.inv_freq {
                let angle = p as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        RopeTables { cos, sin, half }
    }
}

impl RopeTables {
    /// Rotates `x: [num_tokens, heads, head_dim]` in place, token `t` by its table row.
    pub fn apply(&self, x: &mut [f32], heads: usize) {
        let head_dim = 2 * self.half;
        for (t, token) in x.chunks_exact_mut(heads * head_dim).enumerate() {
            let cos = &self.cos[t * self.half..][..self.half];
            let sin = &self.sin[t * self.half..][..self.half];
            for head in token.chunks_exact_mut(head_dim) {
                let (a, b) = head.split_at_mut(self.half);
                for i in 0..self.half {
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

    #[test]
    fn position_zero_is_the_identity() {
        let rope = Rope::new(
            &RopeConfig {
                theta: 10000.0,
                scaling: RopeScaling::Default,
            },
            4,
        );
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        rope.tables(&[0]).apply(&mut x, 1);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn llama3_scaling_divides_low_frequencies_and_keeps_high_ones() {
        let plain = Rope::new(
            &RopeConfig {
                theta: 500000.0,
                scaling: RopeScaling::Default,
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
            },
            16,
        );
        assert_eq!(scaled.inv_freq[0], plain.inv_freq[0]);
        let last = plain.inv_freq.len() - 1;
        assert!((scaled.inv_freq[last] - plain.inv_freq[last] / 8.0).abs() < 1e-12);
    }
}
