//! The prefix cache's disk tier (`--kv-disk-cache DIR`): full KV blocks kept in files named by
//! the model's fingerprint and the block's stable key, so a prompt computed once is read back
//! instead of computed again, after it left the RAM pool, after a model unload and reload, and
//! after a restart.
//!
//! - **What is written**: every block the RAM prefix cache registers, as it registers it (a
//!   write-through: the engine copies the block's bytes out of the KV cache after the step that
//!   computed it and hands them to the writer thread, so a block later evicted from RAM, and
//!   everything at a shutdown or unload, is already on disk or queued). Writing never blocks a
//!   step: the queue is bounded and a block that does not fit it is skipped and counted.
//! - **What is read**: the block manager asks [`ModelDisk`] (a [`LowerTier`]) for the blocks of a
//!   prompt its pools miss; a file is used only when its model fingerprint, group, key, parent
//!   key, token ids, length and SHA-256 digest all match (`file.rs`), else it is ignored (and
//!   removed when damaged), and the prompt computes those tokens as if nothing were cached.
//! - **Bound**: `--kv-disk-cache-size` GiB; least recently used files (by write or read) go
//!   first. Several servers may share a directory: files appear by atomic rename, each server
//!   indexes what it saw at start and what it wrote, and a file another server removed is a
//!   miss.
//! - **Privacy**: the directory holds users' prompts in KV form (and their token ids): it is
//!   created 0700 and files 0600, and the tenant scope (API key, `cache_salt`) is part of every
//!   block key, so one tenant's blocks are never found for another.

mod file;
mod fingerprint;
mod index;
mod writer;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::Sender;
use sluice_model::KvGroupId;
use thiserror::Error;

use crate::block_manager::{BlockBytes, BlockHash, KvEvent, LowerTier};
use crate::kv_events::{KvEventSink, Medium};
use file::{decode, EntryKey, Expected, FileError};
use index::Index;
use writer::Job;

/// Block bytes the writer may have queued before new blocks are skipped.
const MAX_QUEUED_BYTES: u64 = 512 << 20;
/// A temporary file older than this at start was left by a writer that died.
const STALE_TEMPORARY: Duration = Duration::from_secs(60);

/// Why the disk cache could not be opened.
#[derive(Debug, Error)]
pub enum DiskCacheError {
    /// The directory cannot be created or written.
    #[error("--kv-disk-cache {dir}: the directory cannot be used: {source}")]
    Unusable {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A model's fingerprint could not be computed (its weights files are unreadable).
    #[error("KV disk cache: cannot fingerprint the model's weights: {0}")]
    Fingerprint(io::Error),
}

/// State the cache handle, the models and the writer thread share.
#[derive(Debug)]
struct Shared {
    root: PathBuf,
    max_bytes: u64,
    index: Mutex<Index>,
    /// False once a write failed for good (a full disk, no permission).
    writing: AtomicBool,
    queued_bytes: AtomicU64,
    /// Each model's KV event stream, by fingerprint, for the blocks that leave the directory.
    streams: Mutex<HashMap<u128, KvEventSink>>,
}

impl Shared {
    fn index(&self) -> MutexGuard<'_, Index> {
        // The index holds no invariant a panicking holder could break halfway.
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes a disk-tier `BlockRemoved` for each of `entries` whose model has a stream.
    fn announce_removed(&self, entries: &[EntryKey]) {
        if entries.is_empty() {
            return;
        }
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        for entry in entries {
            if let Some(sink) = streams.get(&entry.model) {
                sink.publish(
                    Medium::Disk,
                    vec![KvEvent::Removed {
                        group: entry.group as usize,
                        block_hashes: vec![BlockHash(entry.key)],
                    }],
                );
            }
        }
    }
}

/// One cache directory, shared by every model of the process.
#[derive(Debug)]
pub struct DiskCache {
    shared: Arc<Shared>,
    jobs: Mutex<Option<Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl DiskCache {
    /// Opens (creating it 0700 if missing) the cache directory `dir`, bounded to `max_bytes`:
    /// indexes the block files already there, removes what dead writers left, and starts the
    /// writer thread. An unwritable directory is an error.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Arc<DiskCache>, DiskCacheError> {
        let unusable = |source| DiskCacheError::Unusable {
            dir: dir.to_path_buf(),
            source,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(unusable)?;
        let probe = dir.join(format!(".probe.{}", std::process::id()));
        (fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600))
        .open(&probe)
        .and_then(|_| fs::remove_file(&probe))
        .map_err(unusable)?;
        let started = Instant::now();
        let mut index = Index::scan(dir, STALE_TEMPORARY);
        index.trim(dir, max_bytes);
        tracing::info!(
            dir = %dir.display(),
            blocks = index.len(),
            gib = format_args!("{:.2}", index.bytes() as f64 / (1u64 << 30) as f64),
            limit_gib = format_args!("{:.2}", max_bytes as f64 / (1u64 << 30) as f64),
            seconds = format_args!("{:.2}", started.elapsed().as_secs_f64()),
            "KV disk cache opened"
        );
        let shared = Arc::new(Shared {
            root: dir.to_path_buf(),
            max_bytes,
            index: Mutex::new(index),
            writing: AtomicBool::new(true),
            queued_bytes: AtomicU64::new(0),
            streams: Mutex::new(HashMap::new()),
        });
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("sluice-kv-disk".into())
            .spawn(move || writer::run(thread_shared, rx))
            .map_err(unusable)?;
        Ok(Arc::new(DiskCache {
            shared,
            jobs: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        }))
    }

    /// The tier of one model: `weight_files` and `facts` (everything else the KV bytes depend
    /// on) make its fingerprint; `block_bytes[g]` is the size of a block of group `g`. The
    /// blocks it writes and the directory removes are published on `events`, if given.
    pub fn model(
        self: &Arc<Self>,
        weight_files: &[PathBuf],
        facts: &str,
        block_bytes: Vec<usize>,
        events: Option<KvEventSink>,
    ) -> Result<ModelDisk, DiskCacheError> {
        let model = fingerprint::fingerprint(&self.shared.root, weight_files, facts)
            .map_err(DiskCacheError::Fingerprint)?;
        let mut streams = self
            .shared
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match &events {
            Some(sink) => streams.insert(model, sink.clone()),
            None => streams.remove(&model),
        };
        drop(streams);
        Ok(ModelDisk {
            cache: Arc::clone(self),
            model,
            block_bytes,
            counters: Arc::new(DiskCounters::default()),
            events,
        })
    }

    /// Waits until every block queued so far is written (or skipped).
    pub fn flush(&self) {
        let (done, wait) = crossbeam_channel::bounded(1);
        if self.send(Job::Flush(done)) {
            let _ = wait.recv();
        }
    }

    fn send(&self, job: Job) -> bool {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }
}

impl Drop for DiskCache {
    /// Writes what is queued, then stops the writer.
    fn drop(&mut self) {
        drop(self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

/// One model's disk counters (the directory's size is shared: see [`DiskSnapshot`]).
#[derive(Debug, Default)]
pub struct DiskCounters {
    blocks_read: AtomicU64,
    blocks_written: AtomicU64,
    read_errors: AtomicU64,
    write_errors: AtomicU64,
    writes_skipped: AtomicU64,
    read_ns: AtomicU64,
}

/// The disk tier as `/metrics` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskSnapshot {
    /// Bytes of block files in the directory (every model's).
    pub bytes_used: u64,
    /// The directory's bound.
    pub bytes_limit: u64,
    /// Blocks this model read back.
    pub blocks_read: u64,
    /// Blocks this model wrote.
    pub blocks_written: u64,
    /// Files that were damaged or unreadable when read.
    pub read_errors: u64,
    /// Writes that failed.
    pub write_errors: u64,
    /// Blocks not written because the queue was full or writing was off.
    pub writes_skipped: u64,
    /// Time spent reading and checking blocks, in nanoseconds.
    pub read_ns: u64,
    /// Whether blocks are still written (false after a full disk or a permission error).
    pub writing: bool,
}

/// The disk tier of one model: its fingerprint, and the way to the shared directory.
#[derive(Debug, Clone)]
pub struct ModelDisk {
    cache: Arc<DiskCache>,
    model: u128,
    block_bytes: Vec<usize>,
    counters: Arc<DiskCounters>,
    events: Option<KvEventSink>,
}

/// Two handles are equal when they name the same model in the same directory.
impl PartialEq for ModelDisk {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model && Arc::ptr_eq(&self.cache, &other.cache)
    }
}

impl ModelDisk {
    fn entry(&self, group: KvGroupId, key: BlockHash) -> EntryKey {
        EntryKey {
            model: self.model,
            group: group as u32,
            key: key.0,
        }
    }

    /// The model's fingerprint.
    pub fn fingerprint(&self) -> u128 {
        self.model
    }

    /// Whether a block keyed `key` of group `group` should be written: writing is on and the
    /// directory does not hold it yet (checked before copying its bytes out of the KV cache).
    pub fn wants(&self, group: KvGroupId, key: BlockHash) -> bool {
        let shared = &self.cache.shared;
        shared.writing.load(Ordering::Acquire) && !shared.index().contains(&self.entry(group, key))
    }

    /// Queues block `key` of group `group` (the block after `parent`'s, holding `tokens`, with
    /// content `payload`) for writing; skipped, and counted, when the queue is full.
    /// `event_parent` is the parent as KV events name it (`None` for a chain's first block).
    pub fn save(
        &self,
        group: KvGroupId,
        key: BlockHash,
        parent: BlockHash,
        event_parent: Option<BlockHash>,
        tokens: Vec<u32>,
        payload: Vec<u8>,
    ) {
        let shared = &self.cache.shared;
        let len = payload.len() as u64;
        let queued = shared.queued_bytes.fetch_add(len, Ordering::AcqRel);
        let job = Job::Write {
            entry: self.entry(group, key),
            parent,
            event_parent,
            tokens,
            payload,
            counters: Arc::clone(&self.counters),
            events: self.events.clone(),
        };
        if queued + len > MAX_QUEUED_BYTES || !self.cache.send(job) {
            shared.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            self.counters.writes_skipped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until every block queued so far is written.
    pub fn flush(&self) {
        self.cache.flush();
    }

    /// The counters and the directory's size now.
    pub fn snapshot(&self) -> DiskSnapshot {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let shared = &self.cache.shared;
        DiskSnapshot {
            bytes_used: shared.index().bytes(),
            bytes_limit: shared.max_bytes,
            blocks_read: get(&c.blocks_read),
            blocks_written: get(&c.blocks_written),
            read_errors: get(&c.read_errors),
            write_errors: get(&c.write_errors),
            writes_skipped: get(&c.writes_skipped),
            read_ns: get(&c.read_ns),
            writing: shared.writing.load(Ordering::Acquire),
        }
    }

    /// Forgets `entry` because its file is unusable, removing the file.
    fn discard(&self, entry: &EntryKey, path: &Path, why: &dyn std::fmt::Display) {
        self.counters.read_errors.fetch_add(1, Ordering::Relaxed);
        let known = self.cache.shared.index().remove(entry);
        let _ = fs::remove_file(path);
        if known {
            self.cache
                .shared
                .announce_removed(std::slice::from_ref(entry));
        }
        tracing::warn!(path = %path.display(), "KV disk cache: a block file was not used: {why}");
    }
}

impl LowerTier for ModelDisk {
    fn contains(&self, group: KvGroupId, key: BlockHash) -> bool {
        self.cache.shared.index().contains(&self.entry(group, key))
    }

    fn read(
        &self,
        group: KvGroupId,
        key: BlockHash,
        parent: BlockHash,
        tokens: &[u32],
    ) -> Option<BlockBytes> {
        let started = Instant::now();
        let entry = self.entry(group, key);
        let path = entry.path(&self.cache.shared.root);
        let mut buffer = Vec::new();
        let opened = File::open(&path).and_then(|mut f| f.read_to_end(&mut buffer).map(|_| f));
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Another server sharing the directory removed it.
                if self.cache.shared.index().remove(&entry) {
                    self.cache.shared.announce_removed(&[entry]);
                }
                return None;
            }
            Err(e) => {
                self.discard(&entry, &path, &e);
                return None;
            }
        };
        let expected = Expected {
            entry,
            parent,
            tokens,
            payload_len: *self.block_bytes.get(group)?,
        };
        let range = match decode(&buffer, &expected) {
            Ok(range) => range,
            Err(FileError::OtherContent) => return None,
            Err(e @ FileError::Damaged(_)) => {
                self.discard(&entry, &path, &e);
                return None;
            }
        };
        // The modification time orders files by last use across restarts.
        let _ = file.set_modified(SystemTime::now());
        self.cache.shared.index().touch(&entry);
        let c = &self.counters;
        c.blocks_read.fetch_add(1, Ordering::Relaxed);
        let ns = started.elapsed().as_nanos() as u64;
        c.read_ns.fetch_add(ns, Ordering::Relaxed);
        Some(BlockBytes::new(buffer, range))
    }
}

#[cfg(test)]
pub(crate) mod tests;
