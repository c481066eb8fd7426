//! What the cache directory holds, in memory: every block file this process knows of, its size,
//! and how recently it was written or read (least recently used files are removed first when
//! the directory outgrows its bound).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::file::{EntryKey, SUFFIX};

#[derive(Debug, Clone, Copy)]
struct Entry {
    bytes: u64,
    tick: u64,
}

/// The known block files, least recently used first.
#[derive(Debug, Default)]
pub(super) struct Index {
    entries: HashMap<EntryKey, Entry>,
    by_use: BTreeMap<u64, EntryKey>,
    next_tick: u64,
    bytes: u64,
}

impl Index {
    /// Bytes of every known file.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Files known.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn contains(&self, entry: &EntryKey) -> bool {
        self.entries.contains_key(entry)
    }

    /// Records a file of `bytes` (the most recently used); replaces an earlier record.
    pub(super) fn insert(&mut self, entry: EntryKey, bytes: u64) {
        self.remove(&entry);
        let tick = self.tick();
        self.entries.insert(entry, Entry { bytes, tick });
        self.by_use.insert(tick, entry);
        self.bytes += bytes;
    }

    /// Marks `entry` the most recently used.
    pub(super) fn touch(&mut self, entry: &EntryKey) {
        let tick = self.tick();
        if let Some(e) = self.entries.get_mut(entry) {
            self.by_use.remove(&e.tick);
            e.tick = tick;
            self.by_use.insert(tick, *entry);
        }
    }

    /// Forgets `entry`; returns whether it was known.
    pub(super) fn remove(&mut self, entry: &EntryKey) -> bool {
        let Some(e) = self.entries.remove(entry) else {
            return false;
        };
        self.by_use.remove(&e.tick);
        self.bytes -= e.bytes;
        true
    }

    /// Forgets and returns the least recently used entry.
    pub(super) fn pop_oldest(&mut self) -> Option<EntryKey> {
        let (_, entry) = self.by_use.pop_first()?;
        let e = self.entries.remove(&entry).expect("indexed both ways");
        self.bytes -= e.bytes;
        Some(entry)
    }

    /// Forgets the least recently used entries, removing their files under `root`, until the
    /// known files hold at most `max_bytes`; returns the entries removed.
    pub(super) fn trim(&mut self, root: &Path, max_bytes: u64) -> Vec<EntryKey> {
        let mut removed = Vec::new();
        while self.bytes > max_bytes {
            let Some(old) = self.pop_oldest() else {
                break;
            };
            let _ = fs::remove_file(old.path(root));
            removed.push(old);
        }
        removed
    }

    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    /// The block files under `root`, oldest modification first (a read sets a file's
    /// modification time, so this is the order of last use across restarts). Leftover
    /// temporary files older than `stale` (a writer killed mid-write) are removed; other files
    /// are left alone.
    pub(super) fn scan(root: &Path, stale: Duration) -> Index {
        let mut found: Vec<(SystemTime, EntryKey, u64)> = Vec::new();
        let now = SystemTime::now();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(listing) = fs::read_dir(&dir) else {
                continue;
            };
            for item in listing.flatten() {
                let (path, Ok(meta)) = (item.path(), item.metadata()) else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(path);
                    continue;
                }
                let modified = meta.modified().unwrap_or(now);
                if let Some(entry) = EntryKey::from_path(root, &path) {
                    found.push((modified, entry, meta.len()));
                } else if is_temporary(&path)
                    && now.duration_since(modified).unwrap_or_default() > stale
                {
                    let _ = fs::remove_file(&path);
                }
            }
        }
        found.sort();
        let mut index = Index::default();
        for (_, entry, bytes) in found {
            index.insert(entry, bytes);
        }
        index
    }
}

/// Whether `path` is a writer's temporary file (`<key>.kv.tmp.<pid>.<n>`).
fn is_temporary(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.contains(&format!(".{SUFFIX}.tmp."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> EntryKey {
        EntryKey {
            model: 1,
            group: 0,
            key: n,
        }
    }

    #[test]
    fn the_least_recently_used_goes_first_and_bytes_add_up() {
        let mut index = Index::default();
        for n in 0..4 {
            index.insert(key(n), 10 + n);
        }
        assert_eq!((index.len(), index.bytes()), (4, 46));
        index.touch(&key(0));
        index.insert(key(2), 100);
        assert_eq!(index.bytes(), 134);
        assert_eq!(index.pop_oldest(), Some(key(1)));
        assert_eq!(index.pop_oldest(), Some(key(3)));
        assert!(index.remove(&key(0)));
        assert!(!index.remove(&key(0)));
        assert_eq!(index.pop_oldest(), Some(key(2)));
        assert_eq!((index.pop_oldest(), index.bytes()), (None, 0));
    }
}
