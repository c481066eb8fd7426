//! One block on disk: where its file lives and the bytes in it.
//!
//! A file is, all integers little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `SLUICEKV` |
//! | 4 | format version (1) |
//! | 16 | the model fingerprint (`u128`) |
//! | 4 | KV group |
//! | 8 | the block's key ([`BlockHash`]) |
//! | 8 | its parent's key |
//! | 4 | number of token ids `n` |
//! | 4 n | the token ids |
//! | 8 | payload length `p` |
//! | p | the payload: the block's bytes as the executor saves them |
//! | 32 | SHA-256 of everything above |
//!
//! A block is used only when every field matches what the reader looks for and the digest is
//! right, so a torn, truncated or altered file, or one of another model, is never used.

use std::ops::Range;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::block_manager::BlockHash;

const MAGIC: &[u8; 8] = b"SLUICEKV";
const VERSION: u32 = 1;
const DIGEST: usize = 32;
/// File name suffix of a finished block file.
pub(super) const SUFFIX: &str = "kv";

/// Which block a file holds, and of which model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct EntryKey {
    /// The model fingerprint.
    pub(super) model: u128,
    /// The KV group.
    pub(super) group: u32,
    /// The block's key.
    pub(super) key: u64,
}

impl EntryKey {
    /// The file's path under the cache directory `root`: `<model>/g<group>/<first key byte>/
    /// <key>.kv`, in lowercase hex (the per-byte folders keep directories small).
    pub(super) fn path(&self, root: &Path) -> PathBuf {
        let key = format!("{:016x}", self.key);
        root.join(format!("{:032x}", self.model))
            .join(format!("g{}", self.group))
            .join(&key[..2])
            .join(format!("{key}.{SUFFIX}"))
    }

    /// The entry a path under `root` names, when it is a block file's.
    pub(super) fn from_path(root: &Path, path: &Path) -> Option<EntryKey> {
        let rel = path.strip_prefix(root).ok()?;
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str()).collect::<Option<_>>()?;
        let [model, group, shard, name] = parts[..] else {
            return None;
        };
        let key = name.strip_suffix(&format!(".{SUFFIX}"))?;
        let entry = EntryKey {
            model: parse_hex(model, 32)?,
            group: group.strip_prefix('g')?.parse().ok()?,
            key: parse_hex(key, 16)? as u64,
        };
        (model.len() == 32 && key.len() == 16 && shard == &key[..2]).then_some(entry)
    }
}

fn parse_hex(text: &str, digits: usize) -> Option<u128> {
    let lower = text
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (text.len() == digits && lower)
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
}

/// What a reader expects a file to hold.
#[derive(Debug, Clone, Copy)]
pub(super) struct Expected<'a> {
    pub(super) entry: EntryKey,
    pub(super) parent: BlockHash,
    pub(super) tokens: &'a [u32],
    pub(super) payload_len: usize,
}

/// Why a file was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum FileError {
    /// Torn, truncated, altered or not a block file: it should be removed.
    #[error("damaged block file: {0}")]
    Damaged(&'static str),
    /// A sound file holding another block's content (a 64-bit key collision): not used, kept.
    #[error("the block file holds other tokens")]
    OtherContent,
}

/// The file for block `entry`: the block after `parent`'s, holding `tokens` and `payload`.
pub(super) fn encode(
    entry: EntryKey,
    parent: BlockHash,
    tokens: &[u32],
    payload: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 4 * tokens.len() + payload.len() + DIGEST);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&entry.model.to_le_bytes());
    out.extend_from_slice(&entry.group.to_le_bytes());
    out.extend_from_slice(&entry.key.to_le_bytes());
    out.extend_from_slice(&parent.0.to_le_bytes());
    out.extend_from_slice(&(tokens.len() as u32).to_le_bytes());
    for t in tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    out
}

/// Checks `file` against what the reader expects; returns where its payload lies.
pub(super) fn decode(file: &[u8], expected: &Expected<'_>) -> Result<Range<usize>, FileError> {
    let body_len = file
        .len()
        .checked_sub(DIGEST)
        .ok_or(FileError::Damaged("shorter than a digest"))?;
    let (body, digest) = file.split_at(body_len);
    if Sha256::digest(body).as_slice() != digest {
        return Err(FileError::Damaged("digest mismatch"));
    }
    let mut r = Reader { bytes: body, at: 0 };
    if r.take(8)? != MAGIC || r.u32()? != VERSION {
        return Err(FileError::Damaged("not a version-1 block file"));
    }
    let entry = EntryKey {
        model: u128::from_le_bytes(r.take(16)?.try_into().expect("16 bytes")),
        group: r.u32()?,
        key: r.u64()?,
    };
    if entry != expected.entry {
        return Err(FileError::Damaged("the file names another block"));
    }
    let parent = BlockHash(r.u64()?);
    let n = r.u32()? as usize;
    let tokens = r.take(4 * n)?;
    let same_tokens = n == expected.tokens.len()
        && (tokens.chunks_exact(4).zip(expected.tokens))
            .all(|(b, &t)| u32::from_le_bytes(b.try_into().expect("4 bytes")) == t);
    if parent != expected.parent || !same_tokens {
        return Err(FileError::OtherContent);
    }
    let payload_len = r.u64()? as usize;
    if payload_len != expected.payload_len || r.at + payload_len != body.len() {
        return Err(FileError::Damaged("payload of the wrong length"));
    }
    Ok(r.at..r.at + payload_len)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FileError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(FileError::Damaged("truncated"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, FileError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, FileError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> EntryKey {
        EntryKey {
            model: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
            group: 1,
            key: 0xfeed_beef_0000_0042,
        }
    }

    #[test]
    fn a_path_names_its_entry_and_nothing_else_parses() {
        let root = Path::new("/cache");
        let path = entry().path(root);
        assert_eq!(
            path,
            Path::new("/cache/0123456789abcdef0011223344556677/g1/fe/feedbeef00000042.kv")
        );
        assert_eq!(EntryKey::from_path(root, &path), Some(entry()));
        for bad in [
            "/cache/0123456789abcdef0011223344556677/g1/ff/feedbeef00000042.kv",
            "/cache/0123456789abcdef0011223344556677/g1/fe/feedbeef00000042.kv.tmp.1.2",
            "/cache/0123456789ABCDEF0011223344556677/g1/fe/feedbeef00000042.kv",
            "/cache/0123456789abcdef0011223344556677/x1/fe/feedbeef00000042.kv",
            "/cache/feedbeef00000042.kv",
        ] {
            assert_eq!(EntryKey::from_path(root, Path::new(bad)), None, "{bad}");
        }
    }

    #[test]
    fn a_file_is_used_only_when_every_field_and_the_digest_match() {
        let (parent, tokens, payload) = (BlockHash(7), [5u32, 6, 7, 8], [9u8; 40]);
        let file = encode(entry(), parent, &tokens, &payload);
        let expected = Expected {
            entry: entry(),
            parent,
            tokens: &tokens,
            payload_len: payload.len(),
        };
        let range = decode(&file, &expected).unwrap();
        assert_eq!(&file[range], &payload);
        // Every flipped byte is caught.
        for i in 0..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x10;
            assert!(
                matches!(decode(&bad, &expected), Err(FileError::Damaged(_))),
                "byte {i}"
            );
        }
        // Every truncation too.
        for len in 0..file.len() {
            assert!(decode(&file[..len], &expected).is_err(), "length {len}");
        }
        // A sound file of another block, model or content.
        let other_model = EntryKey {
            model: 1,
            ..entry()
        };
        let wrong = |e: &Expected<'_>| decode(&file, e).unwrap_err();
        assert!(matches!(
            wrong(&Expected {
                entry: other_model,
                ..expected
            }),
            FileError::Damaged(_)
        ));
        assert_eq!(
            wrong(&Expected {
                tokens: &[5, 6, 7, 9],
                ..expected
            }),
            FileError::OtherContent
        );
        assert_eq!(
            wrong(&Expected {
                parent: BlockHash(8),
                ..expected
            }),
            FileError::OtherContent
        );
        assert!(matches!(
            wrong(&Expected {
                payload_len: 41,
                ..expected
            }),
            FileError::Damaged(_)
        ));
    }
}
