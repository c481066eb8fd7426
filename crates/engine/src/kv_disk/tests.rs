use std::os::unix::fs::PermissionsExt;

use super::*;

const BLOCK: usize = 64;

fn open(dir: &Path, max_bytes: u64) -> (Arc<DiskCache>, ModelDisk) {
    let cache = DiskCache::open(dir, max_bytes).unwrap();
    let weights = dir.parent().unwrap().join("weights.bin");
    if !weights.exists() {
        fs::write(&weights, b"the weights").unwrap();
    }
    let model = cache
        .model(&[weights], "test facts", vec![BLOCK, BLOCK / 2], None)
        .unwrap();
    (cache, model)
}

fn payload(seed: u8) -> Vec<u8> {
    (0..BLOCK).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// The block files under `dir` (the remembered weight digests aside).
pub(crate) fn block_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in fs::read_dir(d).unwrap().flatten() {
            let path = item.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "kv") {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn a_written_block_reads_back_in_this_process_and_after_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let (key, parent, tokens) = (BlockHash(42), BlockHash(7), vec![1, 2, 3, 4]);
    {
        let (_cache, disk) = open(&dir, 1 << 20);
        assert!(disk.wants(0, key) && !disk.contains(0, key));
        disk.save(0, key, parent, None, tokens.clone(), payload(1));
        disk.flush();
        assert!(disk.contains(0, key) && !disk.wants(0, key));
        assert!(!disk.contains(1, key), "groups are apart");
        let bytes = disk.read(0, key, parent, &tokens).unwrap();
        assert_eq!(&bytes[..], &payload(1)[..]);
        // Other tokens or another parent under the same key: not used, and kept.
        assert!(disk.read(0, key, parent, &[1, 2, 3, 5]).is_none());
        assert!(disk.read(0, key, BlockHash(8), &tokens).is_none());
        assert!(disk.contains(0, key));
        let s = disk.snapshot();
        assert_eq!((s.blocks_written, s.blocks_read, s.read_errors), (1, 1, 0));
        assert!(s.bytes_used > BLOCK as u64 && s.writing);
    }
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let files = block_files(&dir);
    assert_eq!(files.len(), 1);
    assert_eq!(mode(&files[0]), 0o600);
    assert_eq!(mode(files[0].parent().unwrap()), 0o700);
    // A new process (a new cache over the same directory) finds it.
    let (_cache, disk) = open(&dir, 1 << 20);
    let bytes = disk.read(0, key, parent, &tokens).unwrap();
    assert_eq!(&bytes[..], &payload(1)[..]);
    // Another model (other weights) never sees it.
    let other_weights = root.path().join("other.bin");
    fs::write(&other_weights, b"other weights").unwrap();
    let cache = DiskCache::open(&dir, 1 << 20).unwrap();
    let other = cache
        .model(&[other_weights], "test facts", vec![BLOCK, BLOCK / 2], None)
        .unwrap();
    assert_ne!(other.fingerprint(), disk.fingerprint());
    assert!(!other.contains(0, key));
    assert!(other.read(0, key, parent, &tokens).is_none());
}

#[test]
fn damaged_files_are_never_used_and_are_removed() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let (_cache, disk) = open(&dir, 1 << 20);
    let tokens = vec![9, 9, 9, 9];
    for k in 0..3 {
        disk.save(
            0,
            BlockHash(k),
            BlockHash(0),
            None,
            tokens.clone(),
            payload(k as u8),
        );
    }
    disk.flush();
    let path = |k: u64| disk.entry(0, BlockHash(k)).path(&dir);
    // A flipped byte, a truncated file, and a file of another block copied over this one.
    let mut bytes = fs::read(path(0)).unwrap();
    bytes[70] ^= 1;
    fs::write(path(0), &bytes).unwrap();
    let whole = fs::read(path(1)).unwrap();
    fs::write(path(1), &whole[..whole.len() / 2]).unwrap();
    fs::copy(path(1), path(2)).unwrap();
    fs::write(path(2), fs::read(path(0)).unwrap()).unwrap();
    for k in 0..3 {
        assert!(
            disk.read(0, BlockHash(k), BlockHash(0), &tokens).is_none(),
            "block {k}"
        );
        assert!(!disk.contains(0, BlockHash(k)));
        assert!(!path(k).exists());
    }
    assert_eq!(disk.snapshot().read_errors, 3);
    // A payload of the wrong length for the group.
    disk.save(
        1,
        BlockHash(5),
        BlockHash(0),
        None,
        tokens.clone(),
        payload(5),
    );
    disk.flush();
    assert!(disk.read(1, BlockHash(5), BlockHash(0), &tokens).is_none());
}

#[test]
fn the_bound_removes_the_least_recently_used_blocks() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let tokens = vec![1; 4];
    let file_len = file::encode(
        EntryKey {
            model: 0,
            group: 0,
            key: 0,
        },
        BlockHash(0),
        &tokens,
        &payload(0),
    )
    .len() as u64;
    let (_cache, disk) = open(&dir, 3 * file_len);
    for k in 0..3 {
        disk.save(
            0,
            BlockHash(k),
            BlockHash(0),
            None,
            tokens.clone(),
            payload(0),
        );
    }
    disk.flush();
    // Block 0 is read (used), so block 1 is the oldest when block 3 arrives.
    assert!(disk.read(0, BlockHash(0), BlockHash(0), &tokens).is_some());
    disk.save(
        0,
        BlockHash(3),
        BlockHash(0),
        None,
        tokens.clone(),
        payload(0),
    );
    disk.flush();
    let held: Vec<bool> = (0..4).map(|k| disk.contains(0, BlockHash(k))).collect();
    assert_eq!(held, [true, false, true, true]);
    assert_eq!(block_files(&dir).len(), 3);
    assert_eq!(disk.snapshot().bytes_used, 3 * file_len);
    // A smaller bound at the next start trims to it, oldest first.
    drop(_cache);
    let (_cache, disk) = open(&dir, file_len);
    assert_eq!(block_files(&dir).len(), 1);
    assert_eq!(disk.snapshot().bytes_used, file_len);
}

#[test]
fn leftovers_of_a_dead_writer_are_removed_and_an_unusable_directory_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let (cache, disk) = open(&dir, 1 << 20);
    disk.save(0, BlockHash(1), BlockHash(0), None, vec![1; 4], payload(1));
    disk.flush();
    drop((cache, disk));
    let file = block_files(&dir).pop().unwrap();
    let temp = file.with_extension("kv.tmp.999.1");
    fs::write(&temp, b"half a block").unwrap();
    let old = SystemTime::now() - Duration::from_secs(3600);
    File::options()
        .write(true)
        .open(&temp)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let fresh = file.with_extension("kv.tmp.999.2");
    fs::write(&fresh, b"another server writing now").unwrap();
    let (_cache, disk) = open(&dir, 1 << 20);
    assert!(!temp.exists(), "a stale temporary file is removed");
    assert!(fresh.exists(), "a fresh one may be another writer's");
    assert!(disk.contains(0, BlockHash(1)));
    // A path under a regular file cannot be a directory.
    let err = DiskCache::open(&file.join("sub"), 1 << 20).unwrap_err();
    assert!(err.to_string().contains("cannot be used"), "{err}");
}

#[test]
fn a_failed_write_turns_writing_off_and_reading_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kv");
    let (_cache, disk) = open(&dir, 1 << 20);
    disk.save(0, BlockHash(1), BlockHash(0), None, vec![1; 4], payload(1));
    disk.flush();
    // Only a mounted, full file system gives the real error; where mounting is not allowed the
    // classification is still checked below.
    let full = root.path().join("full");
    fs::create_dir(&full).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&full)
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        let (cache, small) = open(&full.join("kv"), 1 << 30);
        for k in 0..200 {
            small.save(
                0,
                BlockHash(k),
                BlockHash(0),
                None,
                vec![1; 4],
                payload(k as u8),
            );
        }
        small.flush();
        let s = small.snapshot();
        assert!(!s.writing, "writing stops on a full disk");
        assert_eq!(s.write_errors, 1, "once");
        assert!(s.blocks_written > 0);
        let written = small.read(0, BlockHash(0), BlockHash(0), &[1; 4]).unwrap();
        assert_eq!(
            &written[..],
            &payload(0)[..],
            "what was written is still read"
        );
        drop((cache, small));
        let _ = std::process::Command::new("umount").arg(&full).status();
    } else {
        eprintln!("SKIPPED: a full tmpfs needs mount permission; checking error kinds only");
    }
    assert!(writer::stops_writing(&io::Error::from(
        io::ErrorKind::StorageFull
    )));
    assert!(!writer::stops_writing(&io::Error::from(
        io::ErrorKind::NotFound
    )));
    assert!(disk.snapshot().writing, "another directory is unaffected");
}
