//! Stored Responses-API responses, for `previous_response_id` and retrieval: a bounded,
//! in-memory map. Nothing survives a restart, which clients of a local server can live with: a
//! missing previous response is a 404 they can recover from by sending the whole conversation.
//!
//! Bounds, applied after every `put`, in this order:
//! - age: an entry older than the maximum age is invisible and removed when next seen;
//! - bytes per API key: a key over its budget loses its own oldest entries; no other key's
//!   entry goes for it (a server without keys has only the total budget);
//! - count and bytes in total: while the store holds too many entries (too many bytes) the
//!   oldest entry of the caller holding the most entries (bytes) goes, so a heavy caller
//!   pays for the room it takes before a light one loses anything. The entry just stored
//!   is never the one evicted.
//!
//! A response that alone exceeds what its caller may hold is not stored at all
//! ([`TooLarge`]). Bytes are an estimate of the memory an entry holds
//! ([`json_heap_bytes`], [`StoredResponse::bytes`]), meant to be a close upper bound.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::size_of;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Default of [`crate::ApiConfig::stored_response_bytes`]: 256 MiB.
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;
/// Default of [`crate::ApiConfig::stored_response_bytes_per_key`]: 64 MiB.
pub const DEFAULT_MAX_BYTES_PER_KEY: usize = 64 << 20;

/// What a finished response leaves behind.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    /// The conversation the response answered, template-ready (`template_messages` form),
    /// without the request's `instructions`, which the next turn does not inherit.
    pub input: Value,
    /// Where in `input` the request's own input begins (what came before is the conversation
    /// of its `previous_response_id`): `GET /v1/responses/{id}/input_items` lists
    /// `input[input_start..]`, so those items are not kept a second time.
    pub input_start: usize,
    /// The response's output items (reasoning, message, function calls) as sent.
    pub output: Value,
    /// The whole response object, for retrieval.
    pub body: Value,
    /// When it was stored; the entry expires `max_age` later.
    pub created: Instant,
    /// The API key (its index) of the caller who made it: only that caller may read, continue
    /// or delete it (`None`: a server without keys).
    pub owner: Option<usize>,
}

impl StoredResponse {
    /// The memory the entry stored under `id` holds, estimated: its JSON values
    /// ([`json_heap_bytes`]), the id (kept twice) and the store's bookkeeping.
    pub fn bytes(&self, id: &str) -> usize {
        ENTRY_OVERHEAD
            + 2 * allocation(id.len())
            + json_heap_bytes(&self.input)
            + json_heap_bytes(&self.output)
            + json_heap_bytes(&self.body)
    }
}

/// Per entry: its slot in the id map (where the entry itself lives) and in the two age
/// indexes, doubled for the slack a growing table keeps.
const ENTRY_OVERHEAD: usize =
    2 * (size_of::<(String, Entry)>() + size_of::<(u64, String)>() + size_of::<u64>());

/// What malloc hands out for a request of `bytes` (0 for none): rounded up to 16 with 16 of
/// bookkeeping, as glibc and most allocators do at least.
fn allocation(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        bytes.next_multiple_of(16) + 16
    }
}

/// The heap memory `value` owns (not its own `size_of::<Value>()`, which its parent holds),
/// estimated from serde_json's layout with `preserve_order` (an object is an `IndexMap`: a
/// vector of (hash, key, value) entries and a hash table of indices), every vector and table
/// at the capacity doubling growth leaves it at. An upper bound within about twice the
/// truth (`crates/api/tests/store_bytes.rs` measures it with a counting allocator), and a
/// walk with no allocation.
pub fn json_heap_bytes(value: &Value) -> usize {
    let slot = size_of::<Value>();
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => allocation(s.len()),
        Value::Array(items) if items.is_empty() => 0,
        Value::Array(items) => {
            let capacity = items.len().max(4).next_power_of_two();
            allocation(capacity * slot) + items.iter().map(json_heap_bytes).sum::<usize>()
        }
        Value::Object(map) if map.is_empty() => 0,
        Value::Object(map) => {
            // hashbrown's bucket count for `len` items (as inserting them one by one leaves
            // it); the entries vector grows to the table's capacity.
            let buckets = match map.len() {
                0..4 => 4,
                4..8 => 8,
                len => (len * 8 / 7).next_power_of_two(),
            };
            let capacity = if buckets < 8 {
                buckets - 1
            } else {
                buckets / 8 * 7
            };
            let entry = size_of::<u64>() + size_of::<String>() + slot;
            allocation(capacity * entry)
                + allocation(buckets * (size_of::<usize>() + 1) + 16)
                + map
                    .iter()
                    .map(|(k, v)| allocation(k.len()) + json_heap_bytes(v))
                    .sum::<usize>()
        }
    }
}

/// A response too large to store: it alone exceeds what its caller may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// The response's estimated size (or a lower bound of it, before it was generated).
    pub bytes: usize,
    /// What the caller may hold.
    pub budget: usize,
    /// Whether `budget` is the per-API-key budget (else the total).
    pub per_key: bool,
}

impl TooLarge {
    /// The budget exceeded, in words: "one API key's budget for stored responses of N bytes".
    pub fn budget_text(&self) -> String {
        let which = if self.per_key {
            "one API key's budget for stored responses"
        } else {
            "the budget for stored responses"
        };
        format!("{which} of {} bytes", self.budget)
    }
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the response takes {} bytes to store, more than {}",
            self.bytes,
            self.budget_text()
        )
    }
}

/// What the store holds and has dropped, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// Entries held (expired ones not yet removed included).
    pub entries: usize,
    /// Their estimated bytes.
    pub bytes: usize,
    /// Entries evicted to keep within a count or byte budget, since the start.
    pub evicted: u64,
    /// Responses not stored because they alone exceeded their caller's budget.
    pub refused: u64,
}

/// A bounded store of responses by id. See the module docs.
#[derive(Debug)]
pub struct ResponseStore {
    max_entries: usize,
    max_age: Duration,
    max_bytes: usize,
    max_bytes_per_key: usize,
    inner: Mutex<Entries>,
}

#[derive(Debug)]
struct Entry {
    /// Insertion number.
    n: u64,
    /// Estimated size ([`StoredResponse::bytes`]).
    bytes: usize,
    response: StoredResponse,
}

/// One caller's share of the store.
#[derive(Debug, Default)]
struct Holder {
    bytes: usize,
    /// Insertion numbers of its entries: the oldest first.
    entries: BTreeSet<u64>,
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<String, Entry>,
    /// Insertion number to id: the oldest first.
    by_age: BTreeMap<u64, String>,
    /// Per owner (API key index).
    holders: HashMap<Option<usize>, Holder>,
    bytes: usize,
    next: u64,
    evicted: u64,
    refused: u64,
}

impl Entries {
    fn remove(&mut self, id: &str) -> Option<StoredResponse> {
        let entry = self.by_id.remove(id)?;
        self.by_age.remove(&entry.n);
        self.bytes -= entry.bytes;
        let owner = entry.response.owner;
        if let Some(holder) = self.holders.get_mut(&owner) {
            holder.bytes -= entry.bytes;
            holder.entries.remove(&entry.n);
            if holder.entries.is_empty() {
                self.holders.remove(&owner);
            }
        }
        Some(entry.response)
    }

    /// Adds an entry; its insertion number.
    fn insert(&mut self, id: String, response: StoredResponse, bytes: usize) -> u64 {
        let n = self.next;
        self.next += 1;
        let holder = self.holders.entry(response.owner).or_default();
        holder.bytes += bytes;
        holder.entries.insert(n);
        self.bytes += bytes;
        self.by_age.insert(n, id.clone());
        self.by_id.insert(id, Entry { n, bytes, response });
        n
    }

    /// Evicts `owner`'s oldest entry unless that is entry `keep`; whether one went.
    fn evict_oldest_of(&mut self, owner: Option<usize>, keep: u64) -> bool {
        let Some(&n) = self.holders.get(&owner).and_then(|h| h.entries.first()) else {
            return false;
        };
        if n == keep {
            return false;
        }
        let id = self.by_age[&n].clone();
        self.remove(&id);
        self.evicted += 1;
        true
    }

    /// Evicts the oldest entry of the caller with the most `measure` (of two alike, the one
    /// with the older entry), never entry `keep`; whether one went.
    fn evict_from_largest(&mut self, measure: fn(&Holder) -> usize, keep: u64) -> bool {
        let largest = self
            .holders
            .iter()
            .filter(|(_, h)| h.entries.first() != Some(&keep))
            .max_by_key(|(_, h)| (measure(h), Reverse(h.entries.first().copied())))
            .map(|(owner, _)| *owner);
        largest.is_some_and(|owner| self.evict_oldest_of(owner, keep))
    }
}

impl ResponseStore {
    /// A store of at most `max_entries` responses (at least one), each kept at most `max_age`,
    /// within the default byte budgets ([`DEFAULT_MAX_BYTES`] in all,
    /// [`DEFAULT_MAX_BYTES_PER_KEY`] per API key).
    pub fn new(max_entries: usize, max_age: Duration) -> Self {
        ResponseStore {
            max_entries: max_entries.max(1),
            max_age,
            max_bytes: DEFAULT_MAX_BYTES,
            max_bytes_per_key: DEFAULT_MAX_BYTES_PER_KEY,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// The store with byte budgets: `total` bytes in all, `per_key` per API key.
    pub fn with_byte_budgets(mut self, total: usize, per_key: usize) -> Self {
        self.max_bytes = total;
        self.max_bytes_per_key = per_key;
        self
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The map stays consistent if a holder panicked: every update is a few inserts.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expired(&self, response: &StoredResponse) -> bool {
        response.created.elapsed() > self.max_age
    }

    /// Whether a response of `bytes` (a lower bound will do, before generating it) could be
    /// stored for `owner` at all.
    pub fn check_room(&self, bytes: usize, owner: Option<usize>) -> Result<(), TooLarge> {
        let (budget, per_key) = match owner {
            Some(_) if self.max_bytes_per_key < self.max_bytes => (self.max_bytes_per_key, true),
            _ => (self.max_bytes, false),
        };
        if bytes > budget {
            return Err(TooLarge {
                bytes,
                budget,
                per_key,
            });
        }
        Ok(())
    }

    /// Stores `response` under `id`, replacing an entry of that id, then removes expired
    /// entries and evicts others to keep within the bounds (see the module docs). A response
    /// that alone exceeds its caller's budget is not stored (an entry of that id is still
    /// removed).
    pub fn put(&self, id: String, response: StoredResponse) -> Result<(), TooLarge> {
        let bytes = response.bytes(&id);
        let owner = response.owner;
        let mut entries = self.entries();
        entries.remove(&id);
        if let Err(too_large) = self.check_room(bytes, owner) {
            entries.refused += 1;
            return Err(too_large);
        }
        let new = entries.insert(id, response, bytes);
        while let Some((&n, oldest)) = entries.by_age.first_key_value() {
            if n == new || !self.expired(&entries.by_id[oldest].response) {
                break;
            }
            let oldest = oldest.clone();
            entries.remove(&oldest);
        }
        if owner.is_some() {
            while entries
                .holders
                .get(&owner)
                .is_some_and(|h| h.bytes > self.max_bytes_per_key)
            {
                if !entries.evict_oldest_of(owner, new) {
                    break;
                }
            }
        }
        while entries.by_id.len() > self.max_entries {
            if !entries.evict_from_largest(|h| h.entries.len(), new) {
                break;
            }
        }
        while entries.bytes > self.max_bytes {
            if !entries.evict_from_largest(|h| h.bytes, new) {
                break;
            }
        }
        Ok(())
    }

    /// The response stored under `id` for `owner`, unless it expired or was evicted. Another
    /// caller's response is not found, as if it did not exist.
    pub fn get(&self, id: &str, owner: Option<usize>) -> Option<StoredResponse> {
        let mut entries = self.entries();
        let response = &entries.by_id.get(id)?.response;
        if response.owner != owner {
            return None;
        }
        if self.expired(response) {
            entries.remove(id);
            return None;
        }
        Some(response.clone())
    }

    /// Removes the response stored under `id` for `owner`; whether there was a live one.
    pub fn delete(&self, id: &str, owner: Option<usize>) -> bool {
        let mut entries = self.entries();
        if entries
            .by_id
            .get(id)
            .is_none_or(|e| e.response.owner != owner)
        {
            return false;
        }
        let removed = entries.remove(id);
        removed.is_some_and(|r| !self.expired(&r))
    }

    /// Number of entries held (expired ones not yet removed included).
    pub fn len(&self) -> usize {
        self.entries().by_id.len()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated bytes held by `owner`'s entries.
    pub fn bytes_of(&self, owner: Option<usize>) -> usize {
        self.entries().holders.get(&owner).map_or(0, |h| h.bytes)
    }

    /// What the store holds and has dropped.
    pub fn usage(&self) -> StoreUsage {
        let entries = self.entries();
        StoreUsage {
            entries: entries.by_id.len(),
            bytes: entries.bytes,
            evicted: entries.evicted,
            refused: entries.refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(text: &str, age: Duration) -> StoredResponse {
        StoredResponse {
            input: json!([{"role": "user", "content": text}]),
            input_start: 0,
            output: json!([]),
            body: json!({"id": text}),
            created: Instant::now()
                .checked_sub(age)
                .expect("clock far enough from boot"),
            owner: None,
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn oldest_entry_is_evicted_first_when_full() {
        let store = ResponseStore::new(2, HOUR);
        store
            .put("a".into(), response("a", Duration::ZERO))
            .unwrap();
        store
            .put("b".into(), response("b", Duration::ZERO))
            .unwrap();
        store
            .put("c".into(), response("c", Duration::ZERO))
            .unwrap();
        assert_eq!(store.len(), 2);
        assert!(store.get("a", None).is_none());
        assert_eq!(store.get("b", None).unwrap().body["id"], "b");
        assert_eq!(store.get("c", None).unwrap().body["id"], "c");
    }

    #[test]
    fn replacing_an_id_refreshes_its_age_rank() {
        let store = ResponseStore::new(2, HOUR);
        store
            .put("a".into(), response("a1", Duration::ZERO))
            .unwrap();
        store
            .put("b".into(), response("b", Duration::ZERO))
            .unwrap();
        store
            .put("a".into(), response("a2", Duration::ZERO))
            .unwrap();
        store
            .put("c".into(), response("c", Duration::ZERO))
            .unwrap();
        assert!(store.get("b", None).is_none(), "b was the oldest");
        assert_eq!(store.get("a", None).unwrap().body["id"], "a2");
    }

    #[test]
    fn expired_entries_are_invisible_and_removed() {
        let store = ResponseStore::new(10, Duration::from_secs(60));
        store
            .put("old".into(), response("old", Duration::from_secs(61)))
            .unwrap();
        assert!(store.get("old", None).is_none());
        assert!(store.is_empty());
        store
            .put("old".into(), response("old", Duration::from_secs(61)))
            .unwrap();
        store
            .put("new".into(), response("new", Duration::ZERO))
            .unwrap();
        assert_eq!(store.len(), 1, "the expired front entry goes on put");
        assert!(!store.delete("old", None));
    }

    #[test]
    fn delete_removes_a_live_entry_once() {
        let store = ResponseStore::new(10, HOUR);
        store
            .put("a".into(), response("a", Duration::ZERO))
            .unwrap();
        assert!(store.delete("a", None));
        assert!(!store.delete("a", None));
        assert!(store.get("a", None).is_none());
    }

    #[test]
    fn another_callers_response_is_not_found() {
        let store = ResponseStore::new(10, HOUR);
        let mine = StoredResponse {
            owner: Some(0),
            ..response("a", Duration::ZERO)
        };
        store.put("a".into(), mine).unwrap();
        assert!(store.get("a", Some(1)).is_none());
        assert!(store.get("a", None).is_none());
        assert!(!store.delete("a", Some(1)));
        assert!(store.get("a", Some(0)).is_some());
        assert!(store.delete("a", Some(0)));
    }

    /// A response of `owner` whose body carries `payload` bytes of metadata.
    fn sized(owner: Option<usize>, payload: usize) -> StoredResponse {
        StoredResponse {
            body: json!({"metadata": {"k": "x".repeat(payload)}}),
            owner,
            ..response("x", Duration::ZERO)
        }
    }

    /// Ids of one length, so that equal responses weigh the same.
    fn id(owner: Option<usize>, i: usize) -> String {
        format!("{}-{i:04}", owner.map_or(9, |k| k))
    }

    fn ids_of(store: &ResponseStore, owner: Option<usize>, n: usize) -> Vec<usize> {
        (0..n)
            .filter(|&i| store.get(&id(owner, i), owner).is_some())
            .collect()
    }

    #[test]
    fn bytes_count_every_part_of_an_entry() {
        let base = response("a", Duration::ZERO);
        let small = base.bytes("resp_1");
        assert!(base.bytes(&"r".repeat(64)) > small, "the id");
        for part in ["input", "output", "body"] {
            let mut bigger = base.clone();
            let value = json!({"metadata": {"k": "x".repeat(1000)}});
            match part {
                "input" => bigger.input = value,
                "output" => bigger.output = value,
                _ => bigger.body = value,
            }
            assert!(bigger.bytes("resp_1") >= small + 1000, "{part}");
        }
        // Structure costs memory that its JSON text does not show: an upper bound counts it.
        let nested = json!([[[[[[[[[[]]]]]]]]]]);
        assert!(json_heap_bytes(&nested) >= 9 * 4 * size_of::<Value>());
        assert_eq!(json_heap_bytes(&json!({})), 0);
        assert_eq!(json_heap_bytes(&json!(12)), 0);
    }

    #[test]
    fn a_key_over_its_budget_loses_its_own_oldest_entries_only() {
        let one = sized(Some(0), 10_000).bytes(&id(Some(0), 0));
        let store = ResponseStore::new(1000, HOUR).with_byte_budgets(100 * one, 3 * one);
        store.put(id(Some(1), 0), sized(Some(1), 10_000)).unwrap();
        for i in 0..10 {
            store.put(id(Some(0), i), sized(Some(0), 10_000)).unwrap();
            assert!(store.bytes_of(Some(0)) <= 3 * one);
        }
        assert_eq!(
            ids_of(&store, Some(0), 10),
            [7, 8, 9],
            "the oldest went first"
        );
        assert_eq!(ids_of(&store, Some(1), 1), [0], "another key's entry stays");
        assert_eq!(store.usage().evicted, 7);
        assert_eq!(store.usage().bytes, 4 * one);
    }

    #[test]
    fn without_keys_only_the_total_budget_applies() {
        let one = sized(None, 10_000).bytes(&id(None, 0));
        let store = ResponseStore::new(1000, HOUR).with_byte_budgets(5 * one, one);
        for i in 0..8 {
            store.put(id(None, i), sized(None, 10_000)).unwrap();
        }
        assert_eq!(ids_of(&store, None, 8), [3, 4, 5, 6, 7]);
        assert_eq!(store.usage().bytes, 5 * one);
    }

    #[test]
    fn the_total_budget_evicts_the_oldest_entry_of_the_largest_holder() {
        let one = sized(Some(0), 10_000).bytes(&id(Some(0), 0));
        let store = ResponseStore::new(1000, HOUR).with_byte_budgets(5 * one, 4 * one);
        // Key 1's entry is the oldest of all, key 0 holds the most.
        store.put(id(Some(1), 0), sized(Some(1), 10_000)).unwrap();
        for i in 0..3 {
            store.put(id(Some(0), i), sized(Some(0), 10_000)).unwrap();
        }
        store.put(id(Some(2), 0), sized(Some(2), 10_000)).unwrap();
        assert_eq!(store.usage().bytes, 5 * one);
        store.put(id(Some(2), 1), sized(Some(2), 10_000)).unwrap();
        assert_eq!(
            ids_of(&store, Some(0), 3),
            [1, 2],
            "the largest holder paid"
        );
        assert_eq!(
            ids_of(&store, Some(1), 1),
            [0],
            "the light key kept its entry"
        );
        assert_eq!(ids_of(&store, Some(2), 2), [0, 1]);
        // Key 2 becomes the largest: it pays for its own new entry.
        store.put(id(Some(2), 2), sized(Some(2), 10_000)).unwrap();
        assert_eq!(ids_of(&store, Some(2), 3), [1, 2]);
        assert_eq!(ids_of(&store, Some(0), 3), [1, 2]);
        assert_eq!(ids_of(&store, Some(1), 1), [0]);
        assert_eq!(store.usage().bytes, 5 * one);
    }

    #[test]
    fn the_entry_just_stored_is_never_the_one_evicted() {
        let small = sized(Some(0), 1_000).bytes(&id(Some(0), 0));
        let large = sized(Some(1), 30_000).bytes(&id(Some(1), 0));
        let store = ResponseStore::new(1000, HOUR).with_byte_budgets(large + small, large);
        store.put(id(Some(0), 0), sized(Some(0), 1_000)).unwrap();
        store.put(id(Some(0), 1), sized(Some(0), 1_000)).unwrap();
        // Key 1 becomes the largest holder with its one new entry: key 0 makes the room.
        store.put(id(Some(1), 0), sized(Some(1), 30_000)).unwrap();
        assert_eq!(ids_of(&store, Some(1), 1), [0]);
        assert_eq!(ids_of(&store, Some(0), 2), [1]);
        assert!(store.usage().bytes <= large + small);
    }

    #[test]
    fn the_count_bound_evicts_from_the_caller_with_the_most_entries() {
        let store = ResponseStore::new(4, HOUR);
        store.put(id(Some(1), 0), sized(Some(1), 10)).unwrap();
        for i in 0..3 {
            store.put(id(Some(0), i), sized(Some(0), 10)).unwrap();
        }
        store.put(id(Some(2), 0), sized(Some(2), 10)).unwrap();
        assert_eq!(store.len(), 4);
        assert_eq!(ids_of(&store, Some(0), 3), [1, 2]);
        assert_eq!(ids_of(&store, Some(1), 1), [0]);
    }

    #[test]
    fn a_response_larger_than_its_callers_budget_is_not_stored() {
        let store = ResponseStore::new(10, HOUR).with_byte_budgets(1 << 20, 64 << 10);
        store.put(id(Some(0), 0), sized(Some(0), 100)).unwrap();
        store.put(id(Some(1), 0), sized(Some(1), 100)).unwrap();
        let before = store.usage();
        let err = store
            .put(id(Some(0), 1), sized(Some(0), 100 << 10))
            .unwrap_err();
        assert!(
            err.per_key && err.budget == 64 << 10 && err.bytes > 100 << 10,
            "{err:?}"
        );
        assert!(err.to_string().contains("one API key's budget"), "{err}");
        assert!(store.get(&id(Some(0), 1), Some(0)).is_none());
        let after = store.usage();
        assert_eq!((after.entries, after.bytes), (before.entries, before.bytes));
        assert_eq!(after.refused, 1);
        // Without keys the total is the budget; within it, the response is stored.
        store.put(id(None, 0), sized(None, 100 << 10)).unwrap();
        let err = store.put(id(None, 1), sized(None, 2 << 20)).unwrap_err();
        assert!(!err.per_key && err.budget == 1 << 20, "{err:?}");
        assert!(store.check_room(2 << 20, None).is_err());
        assert!(store.check_room(100 << 10, Some(3)).is_err());
        assert!(store.check_room(100 << 10, None).is_ok());
    }

    #[test]
    fn removing_entries_gives_their_bytes_back() {
        let store = ResponseStore::new(10, HOUR);
        store.put("a".into(), sized(Some(0), 1000)).unwrap();
        store.put("b".into(), sized(Some(0), 1000)).unwrap();
        let two = store.usage().bytes;
        assert_eq!(store.bytes_of(Some(0)), two);
        store.put("b".into(), sized(Some(0), 1000)).unwrap();
        assert_eq!(
            store.usage().bytes,
            two,
            "a replaced entry is not counted twice"
        );
        assert!(store.delete("a", Some(0)));
        assert!(store.delete("b", Some(0)));
        assert_eq!(store.usage().bytes, 0);
        assert_eq!(store.bytes_of(Some(0)), 0);
    }

    /// Issue 30's attack in miniature: each response carries as much as the request may; the
    /// store keeps to its budget instead of its count.
    #[test]
    fn many_large_responses_stay_within_the_byte_budget() {
        let budget = 4 << 20;
        let store = ResponseStore::new(1024, HOUR).with_byte_budgets(budget, budget / 4);
        for i in 0..2000 {
            let owner = Some(i % 3);
            let metadata: serde_json::Map<String, Value> = (0..16)
                .map(|k| (format!("{k:064}"), json!("v".repeat(512))))
                .collect();
            let response = StoredResponse {
                input: json!([{"role": "user", "content": "x".repeat(20_000)}]),
                body: json!({"metadata": metadata, "instructions": "y".repeat(5_000)}),
                owner,
                ..response("r", Duration::ZERO)
            };
            store.put(format!("resp_{i:06}"), response).unwrap();
            assert!(store.usage().bytes <= budget);
            assert!(store.bytes_of(owner) <= budget / 4);
        }
        let usage = store.usage();
        assert!(usage.entries < 1024 && usage.evicted > 0, "{usage:?}");
    }
}
