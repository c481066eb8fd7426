//! Paged KV storage: a fixed pool of blocks, each holding `block_size` tokens' keys and values
//! for every layer. The engine's block manager decides which blocks a sequence owns; the forward
//! pass writes new tokens to the slots the batch names and reads history through block tables.

use half::{bf16, f16};

use crate::config::ModelConfig;
use crate::kernels::paged_attention::PagedKv;
use crate::kernels::vector::KvElement;
use crate::kv_layout::{KvDtype, KvGroupId, KvLayout, KvPools, FULL_GROUP};

/// One layer's keys and values, block-major and then head-major:
/// `[num_blocks, num_kv_heads, block_size, head_dim]`, so the rows one attention head reads from
/// a block are contiguous (one stream for the prefetcher instead of a stride per position).
#[derive(Debug)]
pub struct LayerKv<E> {
    pub(crate) keys: Vec<E>,
    pub(crate) values: Vec<E>,
}

/// Where a slot's row for one KV head starts in [`LayerKv`] storage.
#[inline]
pub(crate) fn row_offset(
    slot: usize,
    head: usize,
    num_kv_heads: usize,
    block_size: usize,
    head_dim: usize,
) -> usize {
    let (block, within) = (slot / block_size, slot % block_size);
    ((block * num_kv_heads + head) * block_size + within) * head_dim
}

impl<E> LayerKv<E> {
    /// The storage as the attention kernel reads it: the layout [`row_offset`] computes, as
    /// strides.
    pub(crate) fn paged(
        &self,
        num_kv_heads: usize,
        block_size: usize,
        head_dim: usize,
    ) -> PagedKv<'_, E> {
        PagedKv {
            keys: &self.keys,
            values: &self.values,
            block_stride: num_kv_heads * block_size * head_dim,
            head_stride: block_size * head_dim,
            row_stride: head_dim,
        }
    }
}

impl<E: KvElement> LayerKv<E> {
    /// Stores one slot's keys and values (`[num_kv_heads * head_dim]` each).
    pub(crate) fn write(
        &mut self,
        slot: usize,
        keys: &[f32],
        values: &[f32],
        block_size: usize,
        head_dim: usize,
    ) {
        let heads = keys.len() / head_dim;
        for h in 0..heads {
            let at = row_offset(slot, h, heads, block_size, head_dim);
            E::store(
                &keys[h * head_dim..][..head_dim],
                &mut self.keys[at..][..head_dim],
            );
            E::store(
                &values[h * head_dim..][..head_dim],
                &mut self.values[at..][..head_dim],
            );
        }
    }
}

/// Every layer's storage, of one element type.
#[derive(Debug)]
enum Layers {
    F32(Vec<LayerKv<f32>>),
    F16(Vec<LayerKv<f16>>),
    Bf16(Vec<LayerKv<bf16>>),
}

/// `$body` with `$l` bound to the layers, whatever their element type.
macro_rules! with_layers {
    ($layers:expr, $l:ident => $body:expr) => {
        match $layers {
            Layers::F32($l) => $body,
            Layers::F16($l) => $body,
            Layers::Bf16($l) => $body,
        }
    };
}

/// One layer of keys and values for each of `sizes` (values per layer), allocated zeroed: the
/// pages are only touched when first written.
fn zeroed_layers<E: bytemuck::Zeroable>(sizes: &[usize]) -> Vec<LayerKv<E>> {
    (sizes.iter())
        .map(|&values| LayerKv {
            keys: bytemuck::zeroed_vec(values),
            values: bytemuck::zeroed_vec(values),
        })
        .collect()
}

/// One layer's storage, borrowed for a forward pass.
pub(crate) enum LayerKvMut<'a> {
    F32(&'a mut LayerKv<f32>),
    F16(&'a mut LayerKv<f16>),
    Bf16(&'a mut LayerKv<bf16>),
}

/// `$body` with `$kv` bound to one layer's storage ([`LayerKvMut`]), whatever its element type:
/// code generic over [`KvElement`] is written once.
macro_rules! with_layer_kv {
    ($storage:expr, $kv:ident => $body:expr) => {
        match $storage {
            $crate::kv_cache::LayerKvMut::F32($kv) => $body,
            $crate::kv_cache::LayerKvMut::F16($kv) => $body,
            $crate::kv_cache::LayerKvMut::Bf16($kv) => $body,
        }
    };
}
pub(crate) use with_layer_kv;

/// One layer's share of the cache for a forward pass.
pub(crate) struct LayerCache<'a> {
    /// The layer's keys and values.
    pub storage: LayerKvMut<'a>,
    /// The KV group whose pool (and whose block tables and slots in the batch) the layer uses.
    pub group: KvGroupId,
    /// Positions per block.
    pub block_size: usize,
}

/// The paged key/value cache of one model: one block pool per KV group (the full-attention
/// layers' and, for a model with sliding-window layers, the window layers'; see
/// [`crate::kv_layout`]).
#[derive(Debug)]
pub struct KvCache {
    block_size: usize,
    pools: KvPools,
    layer_groups: Vec<KvGroupId>,
    num_kv_heads: usize,
    head_dim: usize,
    layers: Layers,
}

impl KvCache {
    /// A zeroed cache of `num_blocks` blocks of `block_size` tokens, shaped for `config`; every
    /// group's pool gets as many blocks (so a batch may address every group through the full
    /// block tables).
    pub fn new(config: &ModelConfig, dtype: KvDtype, block_size: usize, num_blocks: usize) -> Self {
        Self::with_pools(
            config,
            dtype,
            block_size,
            KvPools::uniform(config, num_blocks),
        )
    }

    /// A zeroed cache with the pools `pools` names. Pages are only touched when first written,
    /// so an idle pool costs address space only.
    pub fn with_pools(
        config: &ModelConfig,
        dtype: KvDtype,
        block_size: usize,
        pools: KvPools,
    ) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        let layout = KvLayout::of(config);
        assert!(
            (pools.groups.iter().map(|p| p.span)).eq(layout.groups.iter().copied()),
            "the pools follow the model's layout"
        );
        let slot_values = config.num_key_value_heads * config.head_dim;
        let layer_values =
            |group: &KvGroupId| pools.groups[*group].num_blocks * block_size * slot_values;
        // Zeroed allocations (untouched pages until first written), one pair per layer.
        let sizes: Vec<usize> = layout.layer_groups.iter().map(layer_values).collect();
        let layers = match dtype {
            KvDtype::F32 => Layers::F32(zeroed_layers(&sizes)),
            KvDtype::F16 => Layers::F16(zeroed_layers(&sizes)),
            KvDtype::Bf16 => Layers::Bf16(zeroed_layers(&sizes)),
        };
        Self {
            block_size,
            pools,
            layer_groups: layout.layer_groups,
            num_kv_heads: config.num_key_value_heads,
            head_dim: config.head_dim,
            layers,
        }
    }

    /// Bytes one block occupies across all layers (keys and values): what one position costs
    /// when every layer keeps it.
    pub fn bytes_per_block(config: &ModelConfig, dtype: KvDtype, block_size: usize) -> usize {
        crate::kv_layout::block_bytes(config, dtype, block_size, config.num_hidden_layers)
    }

    /// The KV spec: one pool per group, the full group's first. The engine's block manager
    /// keeps one pool of as many blocks per group.
    pub fn pools(&self) -> &KvPools {
        &self.pools
    }

    /// The group whose pool layer `layer` reads and writes.
    pub(crate) fn group(&self, layer: usize) -> KvGroupId {
        self.layer_groups[layer]
    }

    /// How keys and values are stored.
    pub fn dtype(&self) -> KvDtype {
        match self.layers {
            Layers::F32(_) => KvDtype::F32,
            Layers::F16(_) => KvDtype::F16,
            Layers::Bf16(_) => KvDtype::Bf16,
        }
    }

    /// Blocks in the full group's pool.
    pub fn num_blocks(&self) -> usize {
        self.pools.groups[FULL_GROUP].num_blocks
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Token slots in the full group's pool (`num_blocks * block_size`).
    pub fn num_slots(&self) -> usize {
        self.num_blocks() * self.block_size
    }

    /// Key/value heads per slot.
    pub(crate) fn num_kv_heads(&self) -> usize {
        self.num_kv_heads
    }

    /// Width of one head.
    pub(crate) fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Layers held.
    pub(crate) fn num_layers(&self) -> usize {
        with_layers!(&self.layers, l => l.len())
    }

    /// Layer `layer`'s storage, group and block size.
    pub(crate) fn layer(&mut self, layer: usize) -> LayerCache<'_> {
        LayerCache {
            group: self.group(layer),
            block_size: self.block_size,
            storage: self.layer_mut(layer),
        }
    }

    /// One layer's storage.
    pub(crate) fn layer_mut(&mut self, layer: usize) -> LayerKvMut<'_> {
        match &mut self.layers {
            Layers::F32(l) => LayerKvMut::F32(&mut l[layer]),
            Layers::F16(l) => LayerKvMut::F16(&mut l[layer]),
            Layers::Bf16(l) => LayerKvMut::Bf16(&mut l[layer]),
        }
    }
}

/// A block's bytes did not fit the slot they were loaded into.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a KV block of group {group} holds {expected} bytes; {got} were given")]
pub struct BlockSizeMismatch {
    /// The group loaded into.
    pub group: KvGroupId,
    /// Bytes one block of that group holds.
    pub expected: usize,
    /// Bytes given.
    pub got: usize,
}

/// Moving whole blocks in and out of the cache, for a lower tier of the prefix cache (a disk).
/// A block's bytes are, for each layer of its group in layer order, the block's keys then its
/// values as stored (`[num_kv_heads, block_size, head_dim]` elements each, native byte order):
/// a block is contiguous in each layer's storage, so a copy is a `memcpy` per layer.
impl KvCache {
    /// Bytes one block of group `group` holds across that group's layers.
    pub fn group_block_bytes(&self, group: KvGroupId) -> usize {
        let layers = self.layer_groups.iter().filter(|&&g| g == group).count();
        2 * layers * self.block_elements() * self.dtype().size()
    }

    fn block_elements(&self) -> usize {
        self.num_kv_heads * self.block_size * self.head_dim
    }

    /// Appends block `block` of group `group` to `out` (see the impl's docs for the layout).
    pub fn save_block(&self, group: KvGroupId, block: usize, out: &mut Vec<u8>) {
        let n = self.block_elements();
        let range = block * n..(block + 1) * n;
        for (layer, _) in (self.layer_groups.iter().enumerate()).filter(|(_, &g)| g == group) {
            with_layers!(&self.layers, l => {
                out.extend_from_slice(bytemuck::cast_slice(&l[layer].keys[range.clone()]));
                out.extend_from_slice(bytemuck::cast_slice(&l[layer].values[range.clone()]));
            })
        }
    }

    /// Overwrites block `block` of group `group` with bytes [`KvCache::save_block`] produced for
    /// a block of the same group of an identically shaped cache.
    pub fn load_block(
        &mut self,
        group: KvGroupId,
        block: usize,
        bytes: &[u8],
    ) -> Result<(), BlockSizeMismatch> {
        let expected = self.group_block_bytes(group);
        if bytes.len() != expected {
            return Err(BlockSizeMismatch {
                group,
                expected,
                got: bytes.len(),
            });
        }
        let n = self.block_elements();
        let range = block * n..(block + 1) * n;
        let mut chunks = bytes.chunks_exact(n * self.dtype().size());
        let layers: Vec<usize> = (self.layer_groups.iter().enumerate())
            .filter(|(_, &g)| g == group)
            .map(|(layer, _)| layer)
            .collect();
        for layer in layers {
            let (keys, values) = (chunks.next(), chunks.next());
            let (Some(keys), Some(values)) = (keys, values) else {
                unreachable!("the length was checked");
            };
            with_layers!(&mut self.layers, l => {
                copy_into(&mut l[layer].keys[range.clone()], keys);
                copy_into(&mut l[layer].values[range.clone()], values);
            })
        }
        Ok(())
    }
}

/// Copies raw bytes into typed storage (the bytes need not be aligned).
fn copy_into<E: bytemuck::Pod>(dst: &mut [E], src: &[u8]) {
    bytemuck::cast_slice_mut::<E, u8>(dst).copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_holds_keys_and_values_of_every_layer() {
        let config = crate::config::tests_support::tiny_config();
        for (dtype, size) in [(KvDtype::F32, 4), (KvDtype::F16, 2), (KvDtype::Bf16, 2)] {
            let per_block = KvCache::bytes_per_block(&config, dtype, 16);
            assert_eq!(
                per_block,
                2 * config.num_hidden_layers
                    * 16
                    * config.num_key_value_heads
                    * config.head_dim
                    * size
            );
            let cache = KvCache::new(&config, dtype, 16, 5);
            assert_eq!(
                (cache.num_blocks(), cache.block_size(), cache.num_slots()),
                (5, 16, 80)
            );
            assert_eq!(cache.dtype(), dtype);
            assert_eq!(cache.pools().window(), None);
        }
    }

    #[test]
    fn a_saved_block_loads_back_bit_for_bit_into_another_cache() {
        let mut config = crate::config::tests_support::tiny_config();
        config.sliding_window = Some(8);
        config.layer_types = Some(vec![
            crate::config::LayerType::Sliding,
            crate::config::LayerType::Full,
        ]);
        for dtype in [KvDtype::F32, KvDtype::F16, KvDtype::Bf16] {
            let pools = KvPools::with_window(6, 8, 4);
            let mut a = KvCache::with_pools(&config, dtype, 4, pools.clone());
            let mut b = KvCache::with_pools(&config, dtype, 4, pools);
            let width = config.num_key_value_heads * config.head_dim;
            // Distinct values in every slot of every layer.
            for layer in 0..2 {
                for slot in 0..16 {
                    let keys: Vec<f32> = (0..width)
                        .map(|i| (layer * 1000 + slot * 10 + i) as f32)
                        .collect();
                    let values: Vec<f32> = keys.iter().map(|k| -k).collect();
                    with_layer_kv!(a.layer_mut(layer), kv => {
                        kv.write(slot, &keys, &values, 4, config.head_dim)
                    })
                }
            }
            for group in [0, 1] {
                let mut bytes = Vec::new();
                a.save_block(group, 2, &mut bytes);
                assert_eq!(bytes.len(), a.group_block_bytes(group));
                assert_eq!(
                    bytes.len(),
                    2 * 4 * width * dtype.size(),
                    "one layer per group"
                );
                b.load_block(group, 3, &bytes).unwrap();
                let mut back = Vec::new();
                b.save_block(group, 3, &mut back);
                assert_eq!(back, bytes);
                let err = b.load_block(group, 3, &bytes[1..]).unwrap_err();
                assert_eq!(err.got, bytes.len() - 1);
            }
            // Block 3 of the full layer (layer 1) now holds block 2's rows of `a`.
            let rows = |c: &mut KvCache, slot| {
                let at = row_offset(slot, 0, config.num_key_value_heads, 4, config.head_dim);
                with_layer_kv!(c.layer_mut(1), kv => kv.keys[at].to_f32())
            };
            assert_eq!(rows(&mut b, 13), rows(&mut a, 9));
        }
    }

    #[test]
    fn paged_strides_address_the_rows_row_offset_does() {
        let (heads, block_size, head_dim) = (3, 4, 8);
        let kv = LayerKv::<f32> {
            keys: Vec::new(),
            values: Vec::new(),
        };
        let paged = kv.paged(heads, block_size, head_dim);
        for slot in [0, 1, 3, 4, 9, 30] {
            for head in 0..heads {
                let (block, within) = (slot / block_size, slot % block_size);
                assert_eq!(
                    block * paged.block_stride
                        + head * paged.head_stride
                        + within * paged.row_stride,
                    row_offset(slot, head, heads, block_size, head_dim)
                );
            }
        }
    }

    #[test]
    fn window_layers_are_sized_by_the_window_pool() {
        let mut config = crate::config::tests_support::tiny_config();
        config.sliding_window = Some(8);
        config.layer_types = Some(vec![
            crate::config::LayerType::Sliding,
            crate::config::LayerType::Full,
        ]);
        let pools = KvPools::with_window(10, 8, 3);
        let mut cache = KvCache::with_pools(&config, KvDtype::F32, 4, pools.clone());
        let slot = config.num_key_value_heads * config.head_dim;
        let len = |cache: &mut KvCache, layer| with_layer_kv!(cache.layer_mut(layer), kv => kv.keys.len());
        assert_eq!((cache.group(0), len(&mut cache, 0)), (1, 3 * 4 * slot));
        assert_eq!(
            (cache.group(1), len(&mut cache, 1)),
            (FULL_GROUP, 10 * 4 * slot)
        );
        assert_eq!(cache.pools(), &pools);
    }
}
