//! Stored Responses-API responses, for `previous_response_id` and retrieval: a bounded,
//! in-memory map. When full, the oldest entry goes first; an entry older than the maximum age
//! is invisible and removed when next seen. Nothing survives a restart, which clients of a
//! local server can live with: a missing previous response is a 404 they can recover from by
//! sending the whole conversation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a finished response leaves behind.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    /// The conversation the response answered, template-ready (`template_messages` form),
    /// without the request's `instructions`, which the next turn does not inherit.
    pub input: Value,
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

/// A bounded store of responses by id. See the module docs.
#[derive(Debug)]
pub struct ResponseStore {
    max_entries: usize,
    max_age: Duration,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Id to (insertion number, response).
    by_id: HashMap<String, (u64, StoredResponse)>,
    /// Insertion number to id: the oldest first.
    by_age: BTreeMap<u64, String>,
    next: u64,
}

impl Entries {
    fn remove(&mut self, id: &str) -> Option<StoredResponse> {
        let (n, response) = self.by_id.remove(id)?;
        self.by_age.remove(&n);
        Some(response)
    }
}

impl ResponseStore {
    /// A store of at most `max_entries` responses (at least one), each kept at most `max_age`.
    pub fn new(max_entries: usize, max_age: Duration) -> Self {
        ResponseStore {
            max_entries: max_entries.max(1),
            max_age,
            inner: Mutex::new(Entries::default()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The map stays consistent if a holder panicked: every update is a few inserts.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expired(&self, response: &StoredResponse) -> bool {
        response.created.elapsed() > self.max_age
    }

    /// Stores `response` under `id`, replacing an entry of that id, evicting the oldest
    /// entries beyond the bound and expired ones.
    pub fn put(&self, id: String, response: StoredResponse) {
        let mut entries = self.entries();
        entries.remove(&id);
        let n = entries.next;
        entries.next += 1;
        entries.by_age.insert(n, id.clone());
        entries.by_id.insert(id, (n, response));
        while let Some((_, oldest)) = entries.by_age.first_key_value() {
            let oldest = oldest.clone();
            let expired = self.expired(&entries.by_id[&oldest].1);
            if entries.by_id.len() <= self.max_entries && !expired {
                break;
            }
            entries.remove(&oldest);
        }
    }

    /// The response stored under `id` for `owner`, unless it expired or was evicted. Another
    /// caller's response is not found, as if it did not exist.
    pub fn get(&self, id: &str, owner: Option<usize>) -> Option<StoredResponse> {
        let mut entries = self.entries();
        let (_, response) = entries.by_id.get(id)?;
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
        if entries.by_id.get(id).is_none_or(|(_, r)| r.owner != owner) {
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
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(text: &str, age: Duration) -> StoredResponse {
        StoredResponse {
            input: json!([{"role": "user", "content": text}]),
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
        store.put("a".into(), response("a", Duration::ZERO));
        store.put("b".into(), response("b", Duration::ZERO));
        store.put("c".into(), response("c", Duration::ZERO));
        assert_eq!(store.len(), 2);
        assert!(store.get("a", None).is_none());
        assert_eq!(store.get("b", None).unwrap().body["id"], "b");
        assert_eq!(store.get("c", None).unwrap().body["id"], "c");
    }

    #[test]
    fn replacing_an_id_refreshes_its_age_rank() {
        let store = ResponseStore::new(2, HOUR);
        store.put("a".into(), response("a1", Duration::ZERO));
        store.put("b".into(), response("b", Duration::ZERO));
        store.put("a".into(), response("a2", Duration::ZERO));
        store.put("c".into(), response("c", Duration::ZERO));
        assert!(store.get("b", None).is_none(), "b was the oldest");
        assert_eq!(store.get("a", None).unwrap().body["id"], "a2");
    }

    #[test]
    fn expired_entries_are_invisible_and_removed() {
        let store = ResponseStore::new(10, Duration::from_secs(60));
        store.put("old".into(), response("old", Duration::from_secs(61)));
        assert!(store.get("old", None).is_none());
        assert!(store.is_empty());
        store.put("old".into(), response("old", Duration::from_secs(61)));
        store.put("new".into(), response("new", Duration::ZERO));
        assert_eq!(store.len(), 1, "the expired front entry goes on put");
        assert!(!store.delete("old", None));
    }

    #[test]
    fn delete_removes_a_live_entry_once() {
        let store = ResponseStore::new(10, HOUR);
        store.put("a".into(), response("a", Duration::ZERO));
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
        store.put("a".into(), mine);
        assert!(store.get("a", Some(1)).is_none());
        assert!(store.get("a", None).is_none());
        assert!(!store.delete("a", Some(1)));
        assert!(store.get("a", Some(0)).is_some());
        assert!(store.delete("a", Some(0)));
    }
}
