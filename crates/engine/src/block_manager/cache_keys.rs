//! What a sequence's chain of block keys is computed under: its cache scope (the tenant's salt,
//! the chain's root) and the extra keys of runs of positions whose tokens do not say what they
//! hold (an image's soft tokens are one id repeated, whatever the image).
//!
//! A block's extra bytes ([`BlockHash::child`]'s `extra`) are, for each key span that overlaps
//! the block, in span order: the span's 32-byte key, then (little-endian `u32`s) the offset of
//! the block's first overlapped position within the span and that position's offset within the
//! block. A block that no span overlaps has none, so text blocks keep the keys they have without
//! images, and the blocks before a prompt's first image are shared with every prompt that has
//! the same text there. Two different images never share a block; the same image at the same
//! place after the same tokens hits, whatever images follow it.

use std::ops::Range;
use std::sync::Arc;

use super::BlockHash;

/// A run of positions computed under an extra key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpan {
    /// The positions it covers.
    pub positions: Range<usize>,
    /// Its key (an image's content hash).
    pub key: [u8; 32],
}

/// The scope and extra keys of a sequence's block chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheKeys {
    /// The scope (see [`super::cache_scope`]): the salt of the chain's root.
    pub salt: Option<u64>,
    /// Key spans in position order, not overlapping.
    spans: Arc<[KeySpan]>,
}

impl From<Option<u64>> for CacheKeys {
    /// A scope without key spans.
    fn from(salt: Option<u64>) -> Self {
        CacheKeys {
            salt,
            spans: Arc::default(),
        }
    }
}

impl CacheKeys {
    /// Scope `salt` with `spans` (ordered by position, not overlapping).
    pub fn new(salt: Option<u64>, spans: Vec<KeySpan>) -> Self {
        debug_assert!(
            spans
                .windows(2)
                .all(|w| w[0].positions.end <= w[1].positions.start),
            "key spans are ordered and apart"
        );
        CacheKeys {
            salt,
            spans: spans.into(),
        }
    }

    /// The root of the chain.
    pub fn root(&self) -> BlockHash {
        BlockHash::root(self.salt)
    }

    /// The key of logical block `index` (of `block_size` positions, holding `tokens`) after
    /// `parent`.
    pub fn child(
        &self,
        parent: BlockHash,
        index: usize,
        block_size: usize,
        tokens: &[u32],
    ) -> BlockHash {
        parent.child(tokens, &self.extra(index, block_size))
    }

    /// The extra bytes of logical block `index` (see the module docs).
    fn extra(&self, index: usize, block_size: usize) -> Vec<u8> {
        let block = index * block_size..(index + 1) * block_size;
        let mut bytes = Vec::new();
        for span in self.spans.iter() {
            if span.positions.end <= block.start {
                continue;
            }
            if span.positions.start >= block.end {
                break;
            }
            let first = span.positions.start.max(block.start);
            bytes.extend_from_slice(&span.key);
            bytes.extend_from_slice(&((first - span.positions.start) as u32).to_le_bytes());
            bytes.extend_from_slice(&((first - block.start) as u32).to_le_bytes());
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(positions: Range<usize>, key: u8) -> KeySpan {
        KeySpan {
            positions,
            key: [key; 32],
        }
    }

    #[test]
    fn blocks_outside_every_span_keep_their_plain_keys() {
        let keys = CacheKeys::new(Some(3), vec![span(6..10, 1)]);
        let plain = CacheKeys::from(Some(3));
        let tokens = [7u32; 4];
        let root = keys.root();
        assert_eq!(root, plain.root());
        // Block 0 (positions 0..4) and block 3 (12..16) touch no span.
        assert_eq!(
            keys.child(root, 0, 4, &tokens),
            plain.child(root, 0, 4, &tokens)
        );
        assert_eq!(
            keys.child(root, 3, 4, &tokens),
            plain.child(root, 3, 4, &tokens)
        );
        // Blocks 1 and 2 hold the span's positions 6..8 and 8..10.
        assert_ne!(
            keys.child(root, 1, 4, &tokens),
            plain.child(root, 1, 4, &tokens)
        );
        assert_ne!(
            keys.child(root, 2, 4, &tokens),
            plain.child(root, 2, 4, &tokens)
        );
    }

    #[test]
    fn the_extra_bytes_follow_the_documented_encoding() {
        let keys = CacheKeys::new(None, vec![span(2..6, 1), span(7..20, 2)]);
        // Block 1 (positions 4..8): span 1 from its offset 2 at block offset 0, span 2 from its
        // offset 0 at block offset 3.
        let mut expected = vec![1u8; 32];
        expected.extend(2u32.to_le_bytes());
        expected.extend(0u32.to_le_bytes());
        expected.extend([2u8; 32]);
        expected.extend(0u32.to_le_bytes());
        expected.extend(3u32.to_le_bytes());
        assert_eq!(keys.extra(1, 4), expected);
        let parent = BlockHash(5);
        assert_eq!(
            keys.child(parent, 1, 4, &[0; 4]),
            parent.child(&[0; 4], &expected)
        );
    }

    #[test]
    fn different_images_give_different_keys_and_the_same_image_the_same() {
        let a = CacheKeys::new(None, vec![span(4..12, 1)]);
        let b = CacheKeys::new(None, vec![span(4..12, 2)]);
        let a_then_more = CacheKeys::new(None, vec![span(4..12, 1), span(20..28, 9)]);
        let tokens = [9u32; 4];
        let root = a.root();
        for index in 1..3 {
            assert_ne!(
                a.child(root, index, 4, &tokens),
                b.child(root, index, 4, &tokens)
            );
            assert_eq!(
                a.child(root, index, 4, &tokens),
                a_then_more.child(root, index, 4, &tokens)
            );
        }
    }
}
