//! The server's tokenizing slots (`--max-concurrent-tokenizations`), shared between callers as
//! the engine shares its seats: a caller alone may take every slot, and when slots are
//! contended the next free one goes to the waiting caller holding the fewest (the earliest
//! among equals), not to whoever queued first. So one key's eight 4 MB prompts delay another
//! key's small request by at most one tokenization, not by all eight.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// Who a tokenization is for (the fair-share caller: API key, else `user`, else anonymous).
pub type SlotCaller = Option<u64>;

/// The tokenizing slots. Cheap to clone; every clone is the same set of slots.
#[derive(Debug, Clone)]
pub struct TokenizingSlots {
    state: Arc<Mutex<SlotState>>,
}

#[derive(Debug)]
struct SlotState {
    free: usize,
    /// Slots each caller holds now.
    held: HashMap<SlotCaller, usize>,
    /// Callers waiting, in arrival order.
    waiting: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    caller: SlotCaller,
    slot: oneshot::Sender<TokenizingSlot>,
}

/// One slot held until dropped; dropping it hands the slot to the next waiter.
#[derive(Debug)]
pub struct TokenizingSlot {
    caller: SlotCaller,
    /// `None` once the slot was handed back without a release (a grant nobody received).
    slots: Option<Arc<Mutex<SlotState>>>,
}

impl TokenizingSlots {
    /// `slots` slots (at least one).
    pub fn new(slots: usize) -> Self {
        TokenizingSlots {
            state: Arc::new(Mutex::new(SlotState {
                free: slots.max(1),
                held: HashMap::new(),
                waiting: VecDeque::new(),
            })),
        }
    }

    /// A slot for `caller`, at once when one is free, else when fair order reaches it.
    /// Dropping the future gives up its place (and any slot granted meanwhile).
    pub async fn acquire(&self, caller: SlotCaller) -> TokenizingSlot {
        let granted = {
            let mut state = self.lock();
            if state.free > 0 {
                state.free -= 1;
                *state.held.entry(caller).or_default() += 1;
                return self.slot(caller);
            }
            let (slot, granted) = oneshot::channel();
            state.waiting.push_back(Waiter { caller, slot });
            granted
        };
        // The sender lives in the queue until a release hands it a slot.
        granted
            .await
            .expect("a waiter's sender is only dropped after sending")
    }

    /// Slots held now and callers waiting, for tests and metrics.
    pub fn usage(&self) -> (usize, usize) {
        let state = self.lock();
        (state.held.values().sum(), state.waiting.len())
    }

    fn slot(&self, caller: SlotCaller) -> TokenizingSlot {
        TokenizingSlot {
            caller,
            slots: Some(Arc::clone(&self.state)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TokenizingSlot {
    fn drop(&mut self) {
        let Some(slots) = self.slots.take() else {
            return;
        };
        let mut state = slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = state.held.get_mut(&self.caller) {
            *held -= 1;
            if *held == 0 {
                state.held.remove(&self.caller);
            }
        }
        // The waiter whose caller holds the fewest slots; the earliest among equals. Waiters
        // whose request went away are skipped (and forgotten).
        loop {
            state.waiting.retain(|w| !w.slot.is_closed());
            let next = (state.waiting.iter().enumerate())
                .min_by_key(|(i, w)| (state.held.get(&w.caller).copied().unwrap_or(0), *i))
                .map(|(i, _)| i);
            let Some(waiter) = next.and_then(|i| state.waiting.remove(i)) else {
                state.free += 1;
                return;
            };
            *state.held.entry(waiter.caller).or_default() += 1;
            let grant = TokenizingSlot {
                caller: waiter.caller,
                slots: Some(Arc::clone(&slots)),
            };
            match waiter.slot.send(grant) {
                Ok(()) => return,
                Err(mut refused) => {
                    // Its request went away between the check and the send: undo, try the next.
                    refused.slots = None;
                    if let Some(held) = state.held.get_mut(&waiter.caller) {
                        *held -= 1;
                        if *held == 0 {
                            state.held.remove(&waiter.caller);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn granted_soon(slots: &TokenizingSlots, caller: SlotCaller) -> Option<TokenizingSlot> {
        tokio::time::timeout(Duration::from_millis(50), slots.acquire(caller))
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_caller_alone_takes_every_slot() {
        let slots = TokenizingSlots::new(2);
        let a = slots.acquire(Some(1)).await;
        let b = slots.acquire(Some(1)).await;
        assert_eq!(slots.usage(), (2, 0));
        assert!(granted_soon(&slots, Some(1)).await.is_none());
        drop((a, b));
        assert_eq!(slots.usage(), (0, 0));
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_caller_holding_fewest_not_the_first_queued() {
        let slots = TokenizingSlots::new(2);
        let first = slots.acquire(Some(1)).await;
        let _second = slots.acquire(Some(1)).await;
        // Caller 1 queues two more, then caller 2 one.
        let queued: Vec<_> = (0..2)
            .map(|_| {
                let slots = slots.clone();
                tokio::spawn(async move { slots.acquire(Some(1)).await })
            })
            .collect();
        while slots.usage().1 < 2 {
            tokio::task::yield_now().await;
        }
        let other = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.acquire(Some(2)).await })
        };
        while slots.usage().1 < 3 {
            tokio::task::yield_now().await;
        }
        drop(first);
        let granted = tokio::time::timeout(Duration::from_secs(5), other).await;
        let granted = granted.expect("caller 2 is served first").unwrap();
        assert_eq!(granted.caller, Some(2));
        assert_eq!(slots.usage(), (2, 2));
        drop(granted);
        let next = tokio::time::timeout(
            Duration::from_secs(5),
            futures_util::future::select_all(queued),
        );
        let (next, _, rest) = next.await.unwrap();
        assert_eq!(next.unwrap().caller, Some(1));
        drop(rest);
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_loses_its_place_and_holds_nothing() {
        let slots = TokenizingSlots::new(1);
        let held = slots.acquire(None).await;
        assert!(
            granted_soon(&slots, Some(7)).await.is_none(),
            "gave up waiting"
        );
        drop(held);
        assert_eq!(
            slots.usage(),
            (0, 0),
            "the slot is free again, not granted to nobody"
        );
        let _again = slots.acquire(Some(7)).await;
        assert_eq!(slots.usage(), (1, 0));
    }
}
