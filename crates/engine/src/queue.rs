//! The waiting queue: priority classes with aging.
//!
//! A waiting entry's effective priority is `base - wait_seconds * aging_rate` (lower is served
//! first). Aging never reorders entries of the same class (they age at the same speed), so each
//! class is kept in arrival order and only the three class heads are compared when popping. Entries
//! are keyed by `(arrival, id)`, so a preempted sequence put back keeps its place by arrival and
//! any entry can be removed (cancellation) in O(log n).

use std::collections::BTreeMap;
use std::time::Instant;

use thiserror::Error;

use crate::request::Priority;

/// Default aging rate: a Low request reaches Normal after 10 s and High after 20 s.
pub const DEFAULT_AGING_RATE: f64 = 0.1;

/// Effective priorities closer than this are equal, so that `2 - 10 s * 0.1` ties with `1`.
const PRIORITY_EPSILON: f64 = 1e-9;

/// The queue already holds its capacity of new entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the waiting queue is full")]
pub struct QueueFull;

/// Effective priority of something of base `priority` that arrived at `arrival`, seen at `now`.
pub fn effective_priority(priority: Priority, arrival: Instant, now: Instant, rate: f64) -> f64 {
    let waited = now.saturating_duration_since(arrival).as_secs_f64();
    priority.base() - waited * rate
}

/// Orders two (effective priority, arrival) pairs: better priority first, earlier arrival among
/// equals. Returns true when `a` is served before `b`.
pub fn served_before(a: (f64, Instant), b: (f64, Instant)) -> bool {
    if (a.0 - b.0).abs() <= PRIORITY_EPSILON {
        a.1 < b.1
    } else {
        a.0 < b.0
    }
}

#[derive(Debug)]
struct Entry<T> {
    item: T,
    /// Put back after preemption: does not count against the capacity.
    requeued: bool,
}

/// Waiting entries in three arrival-ordered classes.
#[derive(Debug)]
pub struct WaitingQueue<T> {
    /// One map per [`Priority`] (High, Normal, Low), keyed by `(arrival, id)`.
    classes: [BTreeMap<(Instant, u64), Entry<T>>; 3],
    aging_rate: f64,
    capacity: usize,
    num_new: usize,
}

fn class(priority: Priority) -> usize {
    match priority {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

const CLASSES: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

impl<T> WaitingQueue<T> {
    /// An empty queue holding at most `capacity` new entries (requeued ones are always taken).
    pub fn new(capacity: usize, aging_rate: f64) -> Self {
        WaitingQueue {
            classes: Default::default(),
            aging_rate,
            capacity,
            num_new: 0,
        }
    }

    /// Number of entries, new and requeued.
    pub fn len(&self) -> usize {
        self.classes.iter().map(BTreeMap::len).sum()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.classes.iter().all(BTreeMap::is_empty)
    }

    /// True when [`WaitingQueue::push`] will accept a new entry.
    pub fn has_room(&self) -> bool {
        self.num_new < self.capacity
    }

    /// Adds a new entry; `id` must be unique and breaks arrival ties. O(log n).
    pub fn push(
        &mut self,
        priority: Priority,
        arrival: Instant,
        id: u64,
        item: T,
    ) -> Result<(), QueueFull> {
        if self.num_new >= self.capacity {
            return Err(QueueFull);
        }
        self.num_new += 1;
        self.classes[class(priority)].insert(
            (arrival, id),
            Entry {
                item,
                requeued: false,
            },
        );
        Ok(())
    }

    /// Puts a preempted entry back at its arrival position, regardless of capacity. O(log n).
    pub fn requeue(&mut self, priority: Priority, arrival: Instant, id: u64, item: T) {
        self.classes[class(priority)].insert(
            (arrival, id),
            Entry {
                item,
                requeued: true,
            },
        );
    }

    /// The class whose head is served next at `now`. O(1) in the number of entries.
    fn best_class(&self, now: Instant) -> Option<usize> {
        let mut best: Option<(usize, f64, Instant)> = None;
        for (c, priority) in CLASSES.iter().enumerate() {
            let Some((&(arrival, _), _)) = self.classes[c].first_key_value() else {
                continue;
            };
            let eff = effective_priority(*priority, arrival, now, self.aging_rate);
            if best.is_none_or(|(_, b_eff, b_arr)| served_before((eff, arrival), (b_eff, b_arr))) {
                best = Some((c, eff, arrival));
            }
        }
        best.map(|(c, _, _)| c)
    }

    /// The entry served next at `now`, without removing it.
    pub fn peek(&self, now: Instant) -> Option<&T> {
        let c = self.best_class(now)?;
        self.classes[c].first_key_value().map(|(_, e)| &e.item)
    }

    /// The entry served next at `now` among those `eligible` accepts, without removing it.
    /// O(n) in the entries passed over.
    pub fn peek_where(&self, now: Instant, mut eligible: impl FnMut(&T) -> bool) -> Option<&T> {
        let mut best: Option<(&T, f64, Instant)> = None;
        for (c, priority) in CLASSES.iter().enumerate() {
            let Some((&(arrival, _), entry)) =
                self.classes[c].iter().find(|(_, e)| eligible(&e.item))
            else {
                continue;
            };
            let eff = effective_priority(*priority, arrival, now, self.aging_rate);
            if best.is_none_or(|(_, b_eff, b_arr)| served_before((eff, arrival), (b_eff, b_arr))) {
                best = Some((&entry.item, eff, arrival));
            }
        }
        best.map(|(item, _, _)| item)
    }

    /// Removes and returns the entry served next at `now`. O(log n).
    pub fn pop(&mut self, now: Instant) -> Option<T> {
        let c = self.best_class(now)?;
        let (_, entry) = self.classes[c].pop_first()?;
        Some(self.account_removed(entry))
    }

    /// Removes a specific entry (a cancelled request). O(log n).
    pub fn remove(&mut self, priority: Priority, arrival: Instant, id: u64) -> Option<T> {
        let entry = self.classes[class(priority)].remove(&(arrival, id))?;
        Some(self.account_removed(entry))
    }

    fn account_removed(&mut self, entry: Entry<T>) -> T {
        if !entry.requeued {
            self.num_new -= 1;
        }
        entry.item
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn queue() -> WaitingQueue<&'static str> {
        WaitingQueue::new(16, DEFAULT_AGING_RATE)
    }

    #[test]
    fn higher_priority_is_served_first() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Low, t0, 1, "low").unwrap();
        q.push(Priority::Normal, t0, 2, "normal").unwrap();
        q.push(Priority::High, t0, 3, "high").unwrap();
        assert_eq!(q.pop(t0), Some("high"));
        assert_eq!(q.pop(t0), Some("normal"));
        assert_eq!(q.pop(t0), Some("low"));
        assert_eq!(q.pop(t0), None);
    }

    #[test]
    fn equal_priorities_are_fifo() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Normal, t0 + Duration::from_millis(2), 1, "b")
            .unwrap();
        q.push(Priority::Normal, t0, 2, "a").unwrap();
        q.push(Priority::Normal, t0 + Duration::from_millis(2), 3, "c")
            .unwrap();
        let now = t0 + Duration::from_secs(1);
        assert_eq!(q.pop(now), Some("a"));
        assert_eq!(q.pop(now), Some("b"));
        assert_eq!(q.pop(now), Some("c"));
    }

    #[test]
    fn low_request_waiting_long_enough_is_served_before_a_fresh_normal_one() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Low, t0, 1, "old low").unwrap();
        // 10.5 s later the Low one's effective priority is 2 - 1.05 = 0.95 < 1.
        let now = t0 + Duration::from_millis(10_500);
        q.push(Priority::Normal, now, 2, "fresh normal").unwrap();
        assert_eq!(q.pop(now), Some("old low"));
    }

    #[test]
    fn low_request_waiting_less_than_ten_seconds_yields_to_a_fresh_normal_one() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Low, t0, 1, "low").unwrap();
        let now = t0 + Duration::from_millis(9_500);
        q.push(Priority::Normal, now, 2, "normal").unwrap();
        assert_eq!(q.pop(now), Some("normal"));
    }

    #[test]
    fn exact_tie_goes_to_the_earlier_arrival() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Low, t0, 1, "low").unwrap();
        let now = t0 + Duration::from_secs(10);
        q.push(Priority::Normal, now, 2, "normal").unwrap();
        assert_eq!(q.peek(now), Some(&"low"));
    }

    #[test]
    fn new_entries_beyond_capacity_are_refused_but_requeued_ones_are_taken() {
        let t0 = Instant::now();
        let mut q = WaitingQueue::new(1, DEFAULT_AGING_RATE);
        q.push(Priority::Normal, t0, 1, "a").unwrap();
        assert_eq!(q.push(Priority::Normal, t0, 2, "b"), Err(QueueFull));
        q.requeue(Priority::Normal, t0, 3, "preempted");
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(t0), Some("a"));
        q.push(Priority::Normal, t0, 4, "c").unwrap();
    }

    #[test]
    fn peek_where_passes_over_ineligible_entries_in_serving_order() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::High, t0, 1, "high a").unwrap();
        q.push(Priority::Normal, t0, 2, "normal b").unwrap();
        q.push(Priority::Normal, t0, 3, "normal a").unwrap();
        q.push(Priority::Low, t0, 4, "low a").unwrap();
        let from_a = |s: &&str| s.ends_with(" a");
        assert_eq!(q.peek_where(t0, from_a), Some(&"high a"));
        let not_high = |s: &&str| !s.starts_with("high");
        assert_eq!(q.peek_where(t0, not_high), Some(&"normal b"));
        q.remove(Priority::High, t0, 1);
        assert_eq!(q.peek_where(t0, from_a), Some(&"normal a"));
        assert_eq!(q.peek_where(t0, |s| s.starts_with('x')), None);
    }

    #[test]
    fn removed_entry_is_never_popped() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Normal, t0, 1, "a").unwrap();
        q.push(Priority::Normal, t0, 2, "b").unwrap();
        assert_eq!(q.remove(Priority::Normal, t0, 1), Some("a"));
        assert_eq!(q.pop(t0), Some("b"));
        assert!(q.is_empty());
    }

    #[test]
    fn requeued_entry_keeps_its_arrival_position() {
        let t0 = Instant::now();
        let mut q = queue();
        q.push(Priority::Normal, t0 + Duration::from_secs(1), 2, "later")
            .unwrap();
        q.requeue(Priority::Normal, t0, 1, "preempted");
        assert_eq!(q.pop(t0 + Duration::from_secs(2)), Some("preempted"));
    }
}
