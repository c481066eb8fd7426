//! The disk tier's writer thread: block files are encoded (digest included) and written here,
//! never on a step loop. A file is written under a temporary name and renamed into place, so a
//! reader (this process, or another server sharing the directory) sees a whole file or none; a
//! writer killed mid-write leaves a temporary file that the next start removes. When the
//! directory outgrows its bound, the least recently used files go. A full disk, a quota or a
//! permission error turns writing off (with one warning) and serving goes on.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::file::{encode, EntryKey, SUFFIX};
use super::{DiskCounters, Shared};
use crate::block_manager::{BlockHash, KvEvent};
use crate::kv_events::{KvEventSink, Medium};

/// Work for the writer.
pub(super) enum Job {
    /// Write the file of one block.
    Write {
        entry: EntryKey,
        parent: BlockHash,
        /// The parent as KV events name it: `None` for a chain's first block.
        event_parent: Option<BlockHash>,
        tokens: Vec<u32>,
        payload: Vec<u8>,
        /// The model's counters.
        counters: Arc<DiskCounters>,
        /// Where the model's KV events go, if anywhere.
        events: Option<KvEventSink>,
    },
    /// Answer once every earlier job is done.
    Flush(Sender<()>),
}

/// Runs until every sender is gone and the queue is empty.
pub(super) fn run(shared: Arc<Shared>, jobs: Receiver<Job>) {
    let mut n = 0u64;
    for job in jobs {
        match job {
            Job::Flush(done) => {
                let _ = done.send(());
            }
            Job::Write {
                entry,
                parent,
                event_parent,
                tokens,
                payload,
                counters,
                events,
            } => {
                shared
                    .queued_bytes
                    .fetch_sub(payload.len() as u64, Ordering::AcqRel);
                if !shared.writing.load(Ordering::Acquire) || shared.index().contains(&entry) {
                    continue;
                }
                n += 1;
                let file = encode(entry, parent, &tokens, &payload);
                let path = entry.path(&shared.root);
                match write_atomically(&path, &file, n) {
                    Ok(()) => {
                        counters.blocks_written.fetch_add(1, Ordering::Relaxed);
                        let removed = {
                            let mut index = shared.index();
                            index.insert(entry, file.len() as u64);
                            index.trim(&shared.root, shared.max_bytes)
                        };
                        if let Some(events) = events {
                            events.publish(
                                Medium::Disk,
                                vec![KvEvent::Stored {
                                    group: entry.group as usize,
                                    block_hashes: vec![BlockHash(entry.key)],
                                    parent: event_parent,
                                    block_size: tokens.len(),
                                    token_ids: tokens,
                                }],
                            );
                        }
                        shared.announce_removed(&removed);
                    }
                    Err(e) => {
                        counters.write_errors.fetch_add(1, Ordering::Relaxed);
                        if stops_writing(&e) {
                            shared.writing.store(false, Ordering::Release);
                            tracing::warn!(
                                dir = %shared.root.display(),
                                "KV disk cache: writing turned off ({e}); serving goes on, \
                                 blocks already on disk are still read"
                            );
                        } else {
                            tracing::warn!(path = %path.display(), "KV disk cache: a block write failed: {e}");
                        }
                    }
                }
            }
        }
    }
}

/// Errors that will not go away by themselves: no room, no quota, no permission.
pub(super) fn stops_writing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::StorageFull
            | ErrorKind::QuotaExceeded
            | ErrorKind::PermissionDenied
            | ErrorKind::ReadOnlyFilesystem
            | ErrorKind::FileTooLarge
    )
}

/// Writes `bytes` to `path` through a temporary file renamed into place (files 0600, folders
/// 0700). Another writer's file at `path` is simply replaced by an identical one.
fn write_atomically(path: &Path, bytes: &[u8], n: u64) -> io::Result<()> {
    let dir = path.parent().expect("a block file has a folder");
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let name = path.file_name().expect("a block file has a name");
    let temp = dir.join(format!(
        "{}.tmp.{}.{n}",
        name.to_string_lossy(),
        std::process::id()
    ));
    debug_assert!(temp.to_string_lossy().contains(&format!(".{SUFFIX}.tmp.")));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}
