//! Which blocks a new table starts from: the longest prefix every KV group can serve, from the
//! prefix cache or from a sibling choice's live table. Each group's policy names the blocks of
//! a prefix it needs (all of them for full attention, the last window's for a sliding window);
//! a prefix counts as computed only when every group has its blocks.

use std::ops::Range;

use super::{BlockHash, BlockId};

/// Where a reused block comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// A block of the group's pool: cached, or held by a sibling.
    Pool(BlockId),
    /// The lower tier's copy of the block keyed `key` (the block after `parent`'s).
    Lower {
        /// The block's key.
        key: BlockHash,
        /// Its parent's key.
        parent: BlockHash,
    },
}

/// The blocks a new table reuses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Reuse {
    /// Leading full blocks of the sequence that count as computed.
    pub(super) num_blocks: usize,
    /// Per group: its first logical block held (those before are not needed, and read as
    /// released), and where the blocks from there to `num_blocks` come from.
    pub(super) groups: Vec<(usize, Vec<Source>)>,
}

impl Reuse {
    /// Nothing reused, in `num_groups` groups.
    pub(super) fn none(num_groups: usize) -> Self {
        Reuse {
            num_blocks: 0,
            groups: vec![(0, Vec::new()); num_groups],
        }
    }
}

/// The longest prefix of at most `present[g].len()` blocks (the same for every group) such that
/// every group `g` has a block at each logical index of `span(g, n)`. `present[g][i]` is the
/// block group `g` could reuse at logical index `i`.
pub(super) fn longest(
    present: &[Vec<Option<Source>>],
    span: impl Fn(usize, usize) -> Range<usize>,
) -> Reuse {
    let num_groups = present.len();
    let n_max = present.iter().map(Vec::len).min().unwrap_or(0);
    // missing[g][i]: blocks absent among the first i of group g.
    let missing: Vec<Vec<usize>> = (present.iter())
        .map(|blocks| {
            let mut counts = vec![0; n_max + 1];
            for i in 0..n_max {
                counts[i + 1] = counts[i] + usize::from(blocks[i].is_none());
            }
            counts
        })
        .collect();
    for n in (1..=n_max).rev() {
        let spans: Vec<Range<usize>> = (0..num_groups).map(|g| span(g, n)).collect();
        let complete = (spans.iter().zip(&missing)).all(|(s, m)| m[s.end] == m[s.start]);
        if complete {
            let groups = (spans.into_iter().zip(present))
                .map(|(s, blocks)| {
                    let held = blocks[s.clone()].iter().map(|b| b.expect("checked"));
                    (s.start, held.collect())
                })
                .collect();
            return Reuse {
                num_blocks: n,
                groups,
            };
        }
    }
    Reuse::none(num_groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_every_group_can_serve_wins() {
        // Group 0 (full) has blocks 0..4; group 1 (a window of one block) misses block 3.
        let p = |ids: &[Option<u32>]| ids.iter().map(|b| b.map(Source::Pool)).collect::<Vec<_>>();
        let present = vec![
            p(&[Some(10), Some(11), Some(12), Some(13)]),
            p(&[None, Some(21), Some(22), None]),
        ];
        let last_block = |g: usize, n: usize| if g == 0 { 0..n } else { n - 1..n };
        let reuse = longest(&present, last_block);
        assert_eq!(reuse.num_blocks, 3);
        let pool = |ids: &[u32]| ids.iter().map(|&b| Source::Pool(b)).collect::<Vec<_>>();
        assert_eq!(
            reuse.groups,
            vec![(0, pool(&[10, 11, 12])), (2, pool(&[22]))]
        );
        // A group missing everything: nothing is reused.
        let absent = vec![present[0].clone(), vec![None; 4]];
        assert_eq!(longest(&absent, last_block), Reuse::none(2));
        assert_eq!(longest(&[Vec::new()], last_block), Reuse::none(1));
    }
}
