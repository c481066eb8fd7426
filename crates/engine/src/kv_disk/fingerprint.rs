//! A model's fingerprint: what a KV block computed by it depends on. A block file is used only
//! by a model with the same fingerprint, so a file of another model, of other weights under the
//! same name, of another KV dtype or block size, or of another sluice release is never used.
//!
//! It is the first 16 bytes of SHA-256 over `"sluice.kv.model.v1"`, the caller's `facts` (a
//! text naming the architecture config, KV dtype, block size, weight dtype as loaded, kernels
//! and release; see the loader), and, per weights file in order, its name, length and the
//! SHA-256 of its contents. Hashing gigabytes takes seconds, so a file's digest is remembered
//! under the cache directory, keyed by its path, length, inode and modification time: a file
//! changed in place gets a new modification time and is hashed again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const TAG: &[u8] = b"sluice.kv.model.v1";
/// Folder of remembered file digests, under the cache directory.
pub(super) const MEMO_DIR: &str = "fingerprints";

/// The fingerprint of a model whose weights are `files`, computed under `facts`.
pub(super) fn fingerprint(root: &Path, files: &[PathBuf], facts: &str) -> io::Result<u128> {
    let mut h = Sha256::new();
    h.update(TAG);
    h.update((facts.len() as u64).to_le_bytes());
    h.update(facts.as_bytes());
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let meta = fs::metadata(path)?;
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update(meta.len().to_le_bytes());
        h.update(file_digest(root, path, &meta)?);
    }
    let digest = h.finalize();
    Ok(u128::from_le_bytes(
        digest[..16].try_into().expect("16 bytes"),
    ))
}

/// SHA-256 of the file's contents, remembered under `root`.
fn file_digest(root: &Path, path: &Path, meta: &fs::Metadata) -> io::Result<[u8; 32]> {
    let canonical = path.canonicalize()?;
    let mut id = Sha256::new();
    id.update(canonical.to_string_lossy().as_bytes());
    for n in [meta.len(), meta.ino(), meta.dev()] {
        id.update(n.to_le_bytes());
    }
    id.update(meta.mtime().to_le_bytes());
    id.update(meta.mtime_nsec().to_le_bytes());
    let memo = root.join(MEMO_DIR).join(hex(&id.finalize()));
    if let Ok(text) = fs::read_to_string(&memo) {
        if let Some(digest) = parse_digest(text.trim()) {
            return Ok(digest);
        }
    }
    let started = std::time::Instant::now();
    let mut file = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let digest: [u8; 32] = h.finalize().into();
    tracing::info!(
        file = %path.display(),
        seconds = format_args!("{:.2}", started.elapsed().as_secs_f64()),
        "KV disk cache: hashed the weights file for the model fingerprint"
    );
    // Remembering is an optimization: a failure only means hashing again next time.
    let _ = remember(&memo, &hex(&digest));
    Ok(digest)
}

fn remember(memo: &Path, text: &str) -> io::Result<()> {
    let dir = memo.parent().expect("a memo has a folder");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let temp = memo.with_extension(format!("tmp.{}", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)?;
    file.write_all(text.as_bytes())?;
    fs::rename(&temp, memo)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_follows_the_weights_bytes_and_the_facts() {
        let root = tempfile::tempdir().unwrap();
        let weights = root.path().join("model.safetensors");
        fs::write(&weights, b"weights one").unwrap();
        let files = [weights.clone()];
        let a = fingerprint(root.path(), &files, "kv=f16").unwrap();
        assert_eq!(
            a,
            fingerprint(root.path(), &files, "kv=f16").unwrap(),
            "stable"
        );
        assert_ne!(a, fingerprint(root.path(), &files, "kv=f32").unwrap());
        // The digest was remembered; new contents (a new modification time) are hashed again.
        assert_eq!(fs::read_dir(root.path().join(MEMO_DIR)).unwrap().count(), 1);
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&weights, b"weights two").unwrap();
        assert_ne!(a, fingerprint(root.path(), &files, "kv=f16").unwrap());
        // A damaged memo is not trusted.
        for memo in fs::read_dir(root.path().join(MEMO_DIR)).unwrap() {
            fs::write(memo.unwrap().path(), "not a digest").unwrap();
        }
        let again = fingerprint(root.path(), &files, "kv=f16").unwrap();
        fs::write(&weights, b"weights one").unwrap();
        assert_eq!(a, fingerprint(root.path(), &files, "kv=f16").unwrap());
        assert_ne!(again, a);
    }
}
