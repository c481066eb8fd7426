//! Rescale and normalise, fused as transformers' torchvision backend fuses them
//! (`rescale_and_normalize`): with both on, `mean' = mean · (1 / rescale_factor)` and
//! `std' = std · (1 / rescale_factor)`, each an f32 product, then `(level - mean') / std'` in f32
//! (torchvision's `normalize`: a subtraction, then a division). The processors of every vision
//! model share it.

/// What becomes of one uint8 level of one channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LevelMap {
    /// `level · scale`, when rescaling without normalising.
    rescale: Option<f32>,
    /// `(level - mean) / std` per channel (the rescale factor folded in when both are on).
    normalize: Option<([f32; 3], [f32; 3])>,
}

impl LevelMap {
    /// The map a processor configuration's `do_rescale`, `rescale_factor`, `do_normalize`,
    /// `image_mean` and `image_std` give; `Err` names what is missing.
    pub(crate) fn new(
        do_rescale: bool,
        rescale_factor: f64,
        do_normalize: bool,
        mean: Option<[f64; 3]>,
        std: Option<[f64; 3]>,
    ) -> Result<Self, &'static str> {
        let to_f32 = |v: [f64; 3]| v.map(|x| x as f32);
        let normalize = match (do_normalize, mean, std) {
            (false, _, _) => None,
            (true, Some(mean), Some(std)) => {
                let (mut mean, mut std) = (to_f32(mean), to_f32(std));
                if do_rescale {
                    let inverse = (1.0 / rescale_factor) as f32;
                    mean = mean.map(|m| m * inverse);
                    std = std.map(|s| s * inverse);
                }
                Some((mean, std))
            }
            (true, _, _) => return Err("do_normalize without image_mean and image_std"),
        };
        let rescale = (do_rescale && normalize.is_none()).then_some(rescale_factor as f32);
        Ok(Self { rescale, normalize })
    }

    /// The fused mean and std, when normalising.
    #[cfg(test)]
    pub(crate) fn normalization(&self) -> Option<([f32; 3], [f32; 3])> {
        self.normalize
    }

    /// The value of `level` in channel `c`.
    #[inline]
    pub(crate) fn apply(&self, c: usize, level: u8) -> f32 {
        let v = f32::from(level);
        match (self.normalize, self.rescale) {
            (Some((mean, std)), _) => (v - mean[c]) / std[c],
            (None, Some(scale)) => v * scale,
            (None, None) => v,
        }
    }
}
