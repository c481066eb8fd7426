//! The `--kv-cache-memory` flag: `auto` (the default) or a fixed number of GiB per model, and
//! the engine setting it becomes once the pool's memory budget is known.

use std::fmt;
use std::str::FromStr;

use sluice_engine::pool::{KvCacheMemory, MemoryShare};

/// What `--kv-cache-memory` says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KvCacheMemoryArg {
    /// Sized per model from `--max-memory` (`sluice_engine::pool::kv_sizing`).
    Auto,
    /// This many GiB for every model.
    Gib(f64),
}

impl KvCacheMemoryArg {
    /// The engine setting, for models that share `share`.
    pub fn setting(self, share: MemoryShare) -> KvCacheMemory {
        match self {
            KvCacheMemoryArg::Auto => KvCacheMemory::Auto(share),
            KvCacheMemoryArg::Gib(gib) => {
                KvCacheMemory::Fixed((gib * (1u64 << 30) as f64) as usize)
            }
        }
    }
}

impl FromStr for KvCacheMemoryArg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(KvCacheMemoryArg::Auto);
        }
        match text.parse::<f64>() {
            // Below a byte per GiB it would round to nothing; a petabyte is no KV budget either.
            Ok(gib) if gib.is_finite() && gib > 0.0 && gib < 1e6 => Ok(KvCacheMemoryArg::Gib(gib)),
            _ => Err(format!(
                "`{text}` is neither `auto` nor a positive number of GiB (e.g. 4 or 0.5)"
            )),
        }
    }
}

impl fmt::Display for KvCacheMemoryArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvCacheMemoryArg::Auto => f.write_str("auto"),
            KvCacheMemoryArg::Gib(gib) => write!(f, "{gib}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_args::parse_for_test;

    fn parse(args: &[&str]) -> Result<KvCacheMemoryArg, String> {
        parse_for_test(args).map(|engine| engine.kv_cache_memory)
    }

    #[test]
    fn auto_is_the_default_and_a_number_of_gib_still_works() {
        assert_eq!(parse(&[]), Ok(KvCacheMemoryArg::Auto));
        assert_eq!(
            parse(&["--kv-cache-memory", "auto"]),
            Ok(KvCacheMemoryArg::Auto)
        );
        assert_eq!(
            parse(&["--kv-cache-memory", "0.01"]),
            Ok(KvCacheMemoryArg::Gib(0.01))
        );
        assert_eq!(
            parse(&["--kv-cache-memory", "4"]),
            Ok(KvCacheMemoryArg::Gib(4.0))
        );
        let share = MemoryShare {
            budget_bytes: 8 << 30,
            models: 2,
        };
        assert_eq!(
            KvCacheMemoryArg::Gib(0.5).setting(share),
            KvCacheMemory::Fixed(1 << 29)
        );
        assert_eq!(
            KvCacheMemoryArg::Auto.setting(share),
            KvCacheMemory::Auto(share)
        );
    }

    #[test]
    fn a_bad_value_is_a_clear_error() {
        for bad in ["lots", "0", "-1", "NaN", "inf", ""] {
            let err = parse(&[&format!("--kv-cache-memory={bad}")]).unwrap_err();
            assert!(
                err.contains("neither `auto` nor a positive number of GiB"),
                "{bad}: {err}"
            );
        }
    }
}
