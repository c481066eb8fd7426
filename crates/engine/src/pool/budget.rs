//! The pool's admission rule, as a pure function over what is loaded: which idle models to
//! unload, least recently used first, so that one more model fits the memory budget and the
//! model-count limit.

use std::time::Duration;

use thiserror::Error;

/// The pool's limits: what every loaded model together must stay within, and how long a load
/// may wait and take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes all loaded models may hold (weights plus KV pools).
    pub max_memory_bytes: usize,
    /// Most models loaded at once; unlimited when `None`.
    pub max_models: Option<usize>,
    /// How long a load that only busy models stand in the way of waits for one of them to go
    /// idle before giving up (their requests are never cut short).
    pub wait_for_idle: Duration,
    /// How long reading a model's files and starting its engine may take (`--load-timeout`);
    /// a load still running then is abandoned and reported to its waiters as an error.
    pub load_timeout: Duration,
}

/// One loaded model as the admission rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident {
    /// Index of the model in the pool.
    pub index: usize,
    /// Bytes it holds.
    pub bytes: usize,
    /// Never unloaded to make room.
    pub pinned: bool,
    /// Has running or queued requests (or a request about to submit).
    pub busy: bool,
    /// Logical time of its last use; smaller is older.
    pub last_used: u64,
}

/// Why a model cannot be admitted even after unloading every idle unpinned model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NoRoom {
    /// The model alone is larger than the whole budget.
    #[error("it needs {} but the whole memory budget (--max-memory) is {}", gib(*needed), gib(*budget))]
    LargerThanBudget {
        /// Bytes the model needs.
        needed: usize,
        /// The budget.
        budget: usize,
    },
    /// Pinned or busy models hold too much memory.
    #[error("it needs {} and only {} of the {} budget (--max-memory) can be freed; the rest is held by pinned or busy models", gib(*needed), gib(*freeable), gib(*budget))]
    Memory {
        /// Bytes the model needs.
        needed: usize,
        /// Bytes free now plus bytes idle unpinned models hold.
        freeable: usize,
        /// The budget.
        budget: usize,
    },
    /// Pinned or busy models take every slot under `--max-models`.
    #[error("all {max_models} model slots (--max-models) are held by pinned or busy models")]
    Slots {
        /// The limit.
        max_models: usize,
    },
}

/// `bytes` in GiB, or MiB below one GiB, for messages.
pub fn gib(bytes: usize) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// The models to unload, oldest first, so that a model of `needed` bytes fits beside the
/// `residents` that stay. Only idle unpinned models are chosen; no more than necessary.
pub fn choose_victims(
    residents: &[Resident],
    needed: usize,
    budget: Budget,
) -> Result<Vec<usize>, NoRoom> {
    if needed > budget.max_memory_bytes {
        return Err(NoRoom::LargerThanBudget {
            needed,
            budget: budget.max_memory_bytes,
        });
    }
    let mut used: usize = residents.iter().map(|r| r.bytes).sum();
    let mut count = residents.len();
    let fits = |used: usize, count: usize| {
        used + needed <= budget.max_memory_bytes && budget.max_models.is_none_or(|m| count < m)
    };
    let mut evictable: Vec<&Resident> = residents.iter().filter(|r| !r.pinned && !r.busy).collect();
    evictable.sort_by_key(|r| r.last_used);
    let mut victims = Vec::new();
    for r in evictable {
        if fits(used, count) {
            break;
        }
        used -= r.bytes;
        count -= 1;
        victims.push(r.index);
    }
    if fits(used, count) {
        return Ok(victims);
    }
    if used + needed > budget.max_memory_bytes {
        Err(NoRoom::Memory {
            needed,
            freeable: budget.max_memory_bytes - used,
            budget: budget.max_memory_bytes,
        })
    } else {
        Err(NoRoom::Slots {
            max_models: budget.max_models.unwrap_or(usize::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(index: usize, bytes: usize, last_used: u64) -> Resident {
        Resident {
            index,
            bytes,
            pinned: false,
            busy: false,
            last_used,
        }
    }

    fn budget(max_memory_bytes: usize, max_models: Option<usize>) -> Budget {
        Budget {
            max_memory_bytes,
            max_models,
            wait_for_idle: Duration::ZERO,
            load_timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_model_that_fits_unloads_nothing() {
        let residents = [idle(0, 40, 1), idle(1, 30, 2)];
        assert_eq!(
            choose_victims(&residents, 30, budget(100, None)),
            Ok(vec![])
        );
    }

    #[test]
    fn the_least_recently_used_idle_model_goes_first_and_only_as_many_as_needed() {
        let residents = [idle(0, 40, 5), idle(1, 40, 2), idle(2, 10, 9)];
        assert_eq!(
            choose_victims(&residents, 30, budget(100, None)),
            Ok(vec![1])
        );
        assert_eq!(
            choose_victims(&residents, 70, budget(100, None)),
            Ok(vec![1, 0])
        );
    }

    #[test]
    fn pinned_and_busy_models_are_never_chosen() {
        let mut pinned = idle(0, 40, 1);
        pinned.pinned = true;
        let mut busy = idle(1, 40, 2);
        busy.busy = true;
        let residents = [pinned, busy, idle(2, 20, 3)];
        assert_eq!(
            choose_victims(&residents, 20, budget(100, None)),
            Ok(vec![2])
        );
        let err = choose_victims(&residents, 30, budget(100, None)).unwrap_err();
        assert_eq!(
            err,
            NoRoom::Memory {
                needed: 30,
                freeable: 20,
                budget: 100
            }
        );
        assert!(err.to_string().contains("pinned or busy"), "{err}");
    }

    #[test]
    fn the_model_count_limit_unloads_even_when_memory_suffices() {
        let residents = [idle(0, 1, 7), idle(1, 1, 3)];
        assert_eq!(
            choose_victims(&residents, 1, budget(100, Some(2))),
            Ok(vec![1])
        );
        let mut pinned = idle(1, 1, 3);
        pinned.pinned = true;
        let mut busy = idle(0, 1, 7);
        busy.busy = true;
        assert_eq!(
            choose_victims(&[busy, pinned], 1, budget(100, Some(2))),
            Err(NoRoom::Slots { max_models: 2 })
        );
    }

    #[test]
    fn a_model_larger_than_the_budget_is_refused_without_unloading() {
        let residents = [idle(0, 10, 1)];
        assert_eq!(
            choose_victims(&residents, 101, budget(100, None)),
            Err(NoRoom::LargerThanBudget {
                needed: 101,
                budget: 100
            })
        );
    }
}
