//! What the benchmark examples share: made-up weights of the right shapes and the process's CPU
//! time. Each example includes this with `mod common;`.

use std::time::Duration;

use sluice_model::{LoadError, RawTensor, TensorSource};

/// Deterministic pseudo-random weights (xorshift32, seeded by the tensor's name), uniform in
/// `±1/√fan_in` like a trained model's, except normalisation weights: `1 ± norm_spread`.
pub struct RandomWeights {
    /// Whether a tensor name is a normalisation weight.
    is_norm: fn(&str) -> bool,
    /// How far normalisation weights spread around 1.
    norm_spread: f32,
}

// Each example uses the weights of its own kind of model.
#[allow(dead_code)]
impl RandomWeights {
    /// A decoder's: `*norm.weight` tensors exactly 1.
    pub const DECODER: Self = Self {
        is_norm: |name| name.ends_with("norm.weight"),
        norm_spread: 0.0,
    };
    /// A vision tower's: every `*norm*` tensor within 1 ± 0.1.
    pub const VISION: Self = Self {
        is_norm: |name| name.contains("norm"),
        norm_spread: 0.1,
    };
}

impl TensorSource for RandomWeights {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let len: usize = shape.iter().product();
        let norm = (self.is_norm)(name);
        let scale = 1.0 / (*shape.last().unwrap_or(&1) as f32).sqrt();
        let mut state = name
            .bytes()
            .fold(0x9e37_79b9u32, |h, b| h.rotate_left(5) ^ b as u32)
            | 1;
        Ok((0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                let r = (state as f32 / u32::MAX as f32) * 2.0 - 1.0;
                if norm {
                    1.0 + self.norm_spread * r
                } else {
                    scale * r
                }
            })
            .collect())
    }

    fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        Ok(RawTensor::from_f32(&self.tensor(name, shape)?, shape))
    }

    fn contains(&self, _name: &str) -> bool {
        true
    }
}

/// CPU time this process has used (all threads), from /proc/self/stat (10 ms ticks), when
/// available.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}
