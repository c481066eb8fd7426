//! Paged KV storage: a fixed pool of blocks, each holding `block_size` tokens' keys and values
//! for every layer. The engine's block manager decides which blocks a sequence owns; the forward
//! pass writes new tokens to the slots the batch names and reads history through block tables.

use half::f16;
use half::vec::HalfBitsVecExt;

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
}

/// One layer's storage, borrowed for a forward pass.
pub(crate) enum LayerKvMut<'a> {
    F32(&'a mut LayerKv<f32>),
    F16(&'a mut LayerKv<f16>),
}

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
        // `vec![0; n]` of a primitive is a zeroed allocation (untouched pages); f16 storage is
        // made from u16 zeros for the same reason.
        let layers = match dtype {
            KvDtype::F32 => Layers::F32(
                (layout.layer_groups.iter())
                    .map(|g| LayerKv {
                        keys: vec![0f32; layer_values(g)],
                        values: vec![0f32; layer_values(g)],
                    })
                    .collect(),
            ),
            KvDtype::F16 => Layers::F16(
                (layout.layer_groups.iter())
                    .map(|g| LayerKv {
                        keys: vec![0u16; layer_values(g)].reinterpret_into::<f16>(),
                        values: vec![0u16; layer_values(g)].reinterpret_into::<f16>(),
                    })
                    .collect(),
            ),
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
        match &self.layers {
            Layers::F32(l) => l.len(),
            Layers::F16(l) => l.len(),
        }
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_holds_keys_and_values_of_every_layer() {
        let config = crate::config::tests_support::tiny_config();
        for (dtype, size) in [(KvDtype::F32, 4), (KvDtype::F16, 2)] {
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
        let len = |cache: &mut KvCache, layer| match cache.layer_mut(layer) {
            LayerKvMut::F32(kv) => kv.keys.len(),
            LayerKvMut::F16(kv) => kv.keys.len(),
        };
        assert_eq!((cache.group(0), len(&mut cache, 0)), (1, 3 * 4 * slot));
        assert_eq!(
            (cache.group(1), len(&mut cache, 1)),
            (FULL_GROUP, 10 * 4 * slot)
        );
        assert_eq!(cache.pools(), &pools);
    }
}
