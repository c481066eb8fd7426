//! The prefix cache's block key: a stable, documented hash of a block's place in a chain and
//! its token ids, the same across runs, processes, machines and releases, so a disk tier can find
//! blocks a previous process wrote and a router outside the process can compute the keys a
//! replica holds from the tokens it routes.
//!
//! Every key is the first 8 bytes, read little-endian, of a SHA-256 digest over a fixed byte
//! encoding (all integers little-endian):
//!
//! - the chain's root: `"sluice.kv.root.v1"`, then `0x00` without a cache salt or `0x01` and the
//!   salt as a `u64` (the salt is the scope of the cache: a tenant, see `GenerationRequest::
//!   cache_salt`);
//! - a block: `"sluice.kv.block.v1"`, the parent's key as a `u64` (the root's for the first
//!   block), the number of token ids as a `u32`, each token id as a `u32`, then the length of the
//!   block's extra keys as a `u32` and their bytes (empty for a text block; for a block holding an
//!   image's tokens, the image's content hash and offsets, see `cache_keys.rs`; so blocks
//!   computed under extra keys never match plain ones).
//!
//! A hit still compares the stored parent and tokens, so a 64-bit collision costs a miss, never a
//! wrong token. Changing this encoding changes every key: bump the `v1` tags when doing so.

use sha2::{Digest, Sha256};

/// The key of a block in the prefix cache (or of a chain's root), see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockHash(pub u64);

const ROOT_TAG: &[u8] = b"sluice.kv.root.v1";
const BLOCK_TAG: &[u8] = b"sluice.kv.block.v1";

fn finish(hasher: Sha256) -> BlockHash {
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    BlockHash(u64::from_le_bytes(first))
}

const SCOPE_TAG: &[u8] = b"sluice.kv.scope.v1";

/// The prefix-cache scope (the `salt` of [`BlockHash::root`]) of a request from `tenant` (the
/// API key it came with) carrying its own `request_salt`; `None`, the one shared scope, when it
/// has neither. Derived by the same fixed encoding (`"sluice.kv.scope.v1"`, then for each of the
/// two a `0x00`, or `0x01`, its length as a `u32` and its UTF-8 bytes), so a tenant's cached
/// prefixes keep their keys across restarts. Only a 64-bit digest of the key ever reaches the
/// cache, never the key.
pub fn cache_scope(tenant: Option<&str>, request_salt: Option<&str>) -> Option<u64> {
    if tenant.is_none() && request_salt.is_none() {
        return None;
    }
    let mut h = Sha256::new();
    h.update(SCOPE_TAG);
    for part in [tenant, request_salt] {
        match part {
            None => h.update([0u8]),
            Some(text) => {
                h.update([1u8]);
                h.update((text.len() as u32).to_le_bytes());
                h.update(text.as_bytes());
            }
        }
    }
    Some(finish(h).0)
}

impl BlockHash {
    /// The root of a chain: the parent of a sequence's first block under cache scope `salt`.
    pub fn root(salt: Option<u64>) -> BlockHash {
        let mut h = Sha256::new();
        h.update(ROOT_TAG);
        match salt {
            None => h.update([0u8]),
            Some(salt) => {
                h.update([1u8]);
                h.update(salt.to_le_bytes());
            }
        }
        finish(h)
    }

    /// The key of the block after `self` holding `tokens`, computed under `extra` keys.
    pub fn child(self, tokens: &[u32], extra: &[u8]) -> BlockHash {
        let mut h = Sha256::new();
        h.update(BLOCK_TAG);
        h.update(self.0.to_le_bytes());
        h.update((tokens.len() as u32).to_le_bytes());
        for &t in tokens {
            h.update(t.to_le_bytes());
        }
        h.update((extra.len() as u32).to_le_bytes());
        h.update(extra);
        finish(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed vectors: these keys are a format (a disk tier and routers rely on them), so any
    /// change to them is a breaking change that must bump the encoding's tags.
    #[test]
    fn keys_match_the_documented_encoding_and_fixed_vectors() {
        // The encoding by hand, for one root and one block.
        let digest = Sha256::digest(b"sluice.kv.root.v1\x00");
        let by_hand = u64::from_le_bytes(digest[..8].try_into().unwrap());
        assert_eq!(BlockHash::root(None), BlockHash(by_hand));
        let mut bytes = b"sluice.kv.block.v1".to_vec();
        bytes.extend(by_hand.to_le_bytes());
        bytes.extend(2u32.to_le_bytes());
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(70000u32.to_le_bytes());
        bytes.extend(0u32.to_le_bytes());
        let digest = Sha256::digest(&bytes);
        let block = u64::from_le_bytes(digest[..8].try_into().unwrap());
        assert_eq!(
            BlockHash::root(None).child(&[1, 70000], &[]),
            BlockHash(block)
        );

        // And pinned values, computed once: the same in every process and release.
        assert_eq!(BlockHash::root(None), BlockHash(FIXED[0]));
        assert_eq!(BlockHash::root(Some(7)), BlockHash(FIXED[1]));
        let tokens: Vec<u32> = (0..16).collect();
        assert_eq!(
            BlockHash::root(None).child(&tokens, &[]),
            BlockHash(FIXED[2])
        );
        assert_eq!(
            BlockHash::root(Some(7)).child(&tokens, &[]),
            BlockHash(FIXED[3])
        );
        assert_eq!(
            BlockHash::root(None).child(&tokens, b"lora:1"),
            BlockHash(FIXED[4])
        );
    }

    /// Computed by an independent implementation (Python's `hashlib.sha256` over the same
    /// bytes): root, root with salt 7, tokens 0..16 under each, and under extra key `lora:1`.
    const FIXED: [u64; 5] = [
        0xef0d_2cb4_ed80_e4f2,
        0x2ddf_f1f2_8985_73ca,
        0x48cf_3d2a_ed46_d061,
        0xfe3b_fe7c_56d3_4cc1,
        0x410d_a8b3_b147_ccb6,
    ];

    #[test]
    fn a_scope_is_its_tenant_and_salt_and_the_same_in_every_process() {
        assert_eq!(cache_scope(None, None), None);
        let scopes = [
            cache_scope(Some("key-a"), None),
            cache_scope(Some("key-b"), None),
            cache_scope(Some("key-a"), Some("s")),
            cache_scope(None, Some("s")),
            cache_scope(None, Some("key-a")),
        ];
        for (i, x) in scopes.iter().enumerate() {
            for y in &scopes[i + 1..] {
                assert_ne!(x, y);
            }
        }
        // Python: sha256(b"sluice.kv.scope.v1\x01\x05\0\0\0key-a\x00"), first 8 bytes LE.
        assert_eq!(scopes[0], Some(SCOPE_KEY_A));
    }

    const SCOPE_KEY_A: u64 = 0x28e4_02e5_4135_8e4c;

    #[test]
    fn keys_depend_on_parent_tokens_order_salt_and_extra_keys() {
        let root = BlockHash::root(None);
        let a = root.child(&[1, 2, 3, 4], &[]);
        let keys = [
            a,
            root.child(&[1, 2, 4, 3], &[]),
            root.child(&[1, 2, 3], &[]),
            a.child(&[1, 2, 3, 4], &[]),
            BlockHash::root(Some(0)).child(&[1, 2, 3, 4], &[]),
            BlockHash::root(Some(1)).child(&[1, 2, 3, 4], &[]),
            root.child(&[1, 2, 3, 4], &[0]),
            root,
        ];
        for (i, x) in keys.iter().enumerate() {
            for y in &keys[i + 1..] {
                assert_ne!(x, y);
            }
        }
        assert_eq!(a, BlockHash::root(None).child(&[1, 2, 3, 4], &[]));
    }
}
