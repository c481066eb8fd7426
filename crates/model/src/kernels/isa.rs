//! The instruction set every CPU kernel runs with: one axis, detected once per process.
//!
//! The matmul formats ([`super::formats`]), the vector kernels ([`super::vector`]) and the
//! sampler's scans all ask [`Isa::current`], so `SLUICE_ISA` moves every kernel family at once.
//! This module is the only place that asks the CPU what it has.

use std::sync::OnceLock;

/// The instruction set a kernel runs with, detected once per process. Every kernel computes the
/// same bits with any of them (a portable kernel follows the vector kernel's operation order, and
/// integer sums are exact in any order), so the choice never changes a result, with one opt-in
/// exception: attention over a bf16 KV cache multiplies in bf16 where
/// [`Isa::has_avx512_bf16`], and in f32 elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// x86-64 with AVX2, FMA and F16C.
    Avx2,
    /// AVX2 plus AVX-512 VNNI on 256-bit vectors (`vpdpbusd`/`vpdpwssd`, with AVX-512VL): the
    /// integer kernels fuse each byte product, pair sum and accumulation into one instruction.
    /// Float kernels run as with [`Isa::Avx2`].
    Avx512Vnni,
    /// AVX-512 VNNI plus Intel AMX-INT8 tiles (Xeons since Sapphire Rapids, where Linux grants
    /// the tile state): the integer kernels run prompt-sized row tiles as tile products
    /// (`kernels/amx.rs`) with the VNNI kernels' integers and epilogue; everything else as
    /// [`Isa::Avx512Vnni`].
    Amx,
    /// Plain Rust, any CPU.
    Portable,
}

/// Every level, from the plainest to the best; each one's CPU features include the previous
/// one's.
const LEVELS: [Isa; 4] = [Isa::Portable, Isa::Avx2, Isa::Avx512Vnni, Isa::Amx];

impl Isa {
    /// The instruction set every kernel of this process runs with: the best one this CPU has,
    /// or the one `SLUICE_ISA` (`portable`, `avx2`, `avx512vnni`, `amx`) names when the CPU has it (a
    /// name it lacks, or no such name, leaves the best). Read once, on the first call; for
    /// comparing kernels, never needed to run. Always one of [`Isa::available`].
    pub fn current() -> Self {
        static CURRENT: OnceLock<Isa> = OnceLock::new();
        *CURRENT.get_or_init(|| {
            let available = Self::available();
            let wanted = std::env::var("SLUICE_ISA")
                .ok()
                .and_then(|name| available.iter().copied().find(|isa| isa.name() == name));
            wanted.unwrap_or(available[available.len() - 1])
        })
    }

    /// Every instruction set this CPU runs, from the plainest to the best, whatever
    /// `SLUICE_ISA` says (tests compare each against [`Isa::Portable`]).
    pub fn available() -> Vec<Self> {
        LEVELS[..=Self::cpu_best().level()].to_vec()
    }

    /// Whether this CPU runs `self`'s instructions, whatever `SLUICE_ISA` says.
    pub fn runs_here(self) -> bool {
        self.level() <= Self::cpu_best().level()
    }

    /// Whether kernels on `self` may use AVX2, FMA and F16C (every level but
    /// [`Isa::Portable`]).
    pub fn has_avx2(self) -> bool {
        matches!(self, Isa::Avx2 | Isa::Avx512Vnni | Isa::Amx)
    }

    /// Whether kernels on `self` may use AVX-512 (F, VL) and VNNI ([`Isa::Avx512Vnni`] and
    /// [`Isa::Amx`]).
    pub fn has_avx512_vnni(self) -> bool {
        matches!(self, Isa::Avx512Vnni | Isa::Amx)
    }

    /// Whether kernels on `self` may use AVX-512 BF16 (`vdpbf16ps`, `vcvtneps2bf16`): levels
    /// with AVX-512 VNNI on a CPU that also has BF16 (AMD Zen 4 and later, Intel Cooper Lake and
    /// Sapphire Rapids on). Attention over a bf16 KV cache multiplies with it.
    pub fn has_avx512_bf16(self) -> bool {
        static BF16: OnceLock<bool> = OnceLock::new();
        self.has_avx512_vnni()
            && *BF16.get_or_init(|| {
                // (Every CPU with BF16 has BW, which the bf16 kernels' masked stores use.)
                #[cfg(target_arch = "x86_64")]
                return std::arch::is_x86_feature_detected!("avx512bf16")
                    && std::arch::is_x86_feature_detected!("avx512bw");
                #[cfg(not(target_arch = "x86_64"))]
                false
            })
    }

    /// The level of the vector kernels on `self`: `self`, except that [`Isa::Amx`]'s are
    /// [`Isa::Avx512Vnni`]'s. Kernel families without tile kernels run on this level.
    pub fn vector(self) -> Self {
        match self {
            Isa::Amx => Isa::Avx512Vnni,
            other => other,
        }
    }

    /// The name `SLUICE_ISA` and the logs use.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx2 => "avx2",
            Isa::Avx512Vnni => "avx512vnni",
            Isa::Amx => "amx",
            Isa::Portable => "portable",
        }
    }

    /// `self`'s place in [`LEVELS`].
    fn level(self) -> usize {
        match self {
            Isa::Portable => 0,
            Isa::Avx2 => 1,
            Isa::Avx512Vnni => 2,
            Isa::Amx => 3,
        }
    }

    /// The best level this CPU has: the one place the CPU's features are asked for.
    fn cpu_best() -> Self {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
                {
                    if std::arch::is_x86_feature_detected!("avx512vnni")
                        && std::arch::is_x86_feature_detected!("avx512vl")
                        && std::arch::is_x86_feature_detected!("avx512f")
                    {
                        return match super::amx::usable() {
                            true => Isa::Amx,
                            false => Isa::Avx512Vnni,
                        };
                    }
                    return Isa::Avx2;
                }
            }
            Isa::Portable
        })
    }
}

#[cfg(test)]
impl Isa {
    /// The levels a test of `what` runs on: every one this CPU has; it says which it skips.
    pub(crate) fn tested(what: &str) -> Vec<Isa> {
        for isa in LEVELS.iter().filter(|isa| !isa.runs_here()) {
            eprintln!("skipping {what} on {}: host lacks it", isa.name());
        }
        Self::available()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_is_one_of_the_available_levels_in_order() {
        let available = Isa::available();
        assert_eq!(available[0], Isa::Portable);
        assert_eq!(available, LEVELS[..available.len()]);
        assert!(LEVELS.iter().enumerate().all(|(i, isa)| isa.level() == i));
        assert!(available.contains(&Isa::current()));
        assert!(available.iter().all(|isa| isa.runs_here()));
        assert!(LEVELS
            .iter()
            .all(|isa| isa.has_avx2() == (*isa != Isa::Portable)));
        assert!(LEVELS
            .iter()
            .all(|isa| isa.has_avx512_vnni() == (isa.level() >= Isa::Avx512Vnni.level())));
        assert_eq!(Isa::tested("the level list"), available);
    }
}
