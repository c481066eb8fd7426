//! vLLM's `KVEventBatch`, as msgspec encodes it (`vllm/distributed/kv_events.py`):
//!
//! - the batch is an array `[ts, events, data_parallel_rank]` in both encodings;
//! - [`Encoding::Array`] (vLLM up to 0.23, and what every consumer decodes): each event is an
//!   array, its tag first (`["BlockStored", block_hashes, parent_block_hash, token_ids,
//!   block_size, lora_id, medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
//!   kv_cache_spec_sliding_window]`, trailing defaults left out as msgspec's `omit_defaults`
//!   does);
//! - [`Encoding::Map`] (vLLM since its PR 42892): each event is a map, the tag under `"type"`,
//!   fields that hold their default (`None`) left out unless vLLM declares no default for them.
//!
//! Block hashes are unsigned 64-bit integers (vLLM's default external hash form); `medium` is
//! `"CPU"` for the memory pool and `"DISK"` for the disk tier; `group_idx` names the KV group,
//! whose kind (`"full_attention"` or `"sliding_window"` with its window) is sent with stores.

use sluice_engine::block_manager::{BlockHash, KvEvent};
use sluice_engine::kv_events::Medium;
use sluice_model::KvSpan;

use crate::msgpack::Writer;

/// How events are laid out inside a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Tagged arrays (vLLM up to 0.23; decoded by every consumer, older ones included).
    #[default]
    Array,
    /// Tagged maps (vLLM since PR 42892).
    Map,
}

/// The medium string of a tier.
pub fn medium_name(medium: Medium) -> &'static str {
    match medium {
        Medium::Memory => "CPU",
        Medium::Disk => "DISK",
    }
}

/// One event with the tier it happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TieredEvent {
    /// Where.
    pub medium: Medium,
    /// What.
    pub event: KvEvent,
}

/// Encodes one `KVEventBatch` of `events`, stamped `ts` (seconds since the Unix epoch), for a
/// model whose group `g` keeps `groups[g]`.
pub fn encode_batch(
    ts: f64,
    events: &[TieredEvent],
    groups: &[KvSpan],
    encoding: Encoding,
) -> Vec<u8> {
    let mut w = Writer::default();
    w.array(3);
    w.f64(ts);
    w.array(events.len());
    for e in events {
        match encoding {
            Encoding::Array => array_event(&mut w, e, groups),
            Encoding::Map => map_event(&mut w, e, groups),
        }
    }
    // The rank of a data-parallel engine; sluice runs one engine per model.
    w.uint(0);
    w.finish()
}

fn hashes(w: &mut Writer, hashes: &[BlockHash]) {
    w.array(hashes.len());
    for h in hashes {
        w.uint(h.0);
    }
}

fn tokens(w: &mut Writer, tokens: &[u32]) {
    w.array(tokens.len());
    for &t in tokens {
        w.uint(u64::from(t));
    }
}

/// vLLM's `kv_cache_spec_kind` and `kv_cache_spec_sliding_window` of group `group`.
fn group_kind(groups: &[KvSpan], group: usize) -> (&'static str, Option<u64>) {
    match groups.get(group) {
        Some(KvSpan::Window(n)) => ("sliding_window", Some(*n as u64)),
        _ => ("full_attention", None),
    }
}

fn array_event(w: &mut Writer, e: &TieredEvent, groups: &[KvSpan]) {
    let medium = medium_name(e.medium);
    match &e.event {
        KvEvent::Stored {
            group,
            block_hashes,
            parent,
            token_ids,
            block_size,
        } => {
            let (kind, window) = group_kind(groups, *group);
            w.array(if window.is_some() { 12 } else { 11 });
            w.str("BlockStored");
            hashes(w, block_hashes);
            w.opt_uint(parent.map(|p| p.0));
            tokens(w, token_ids);
            w.uint(*block_size as u64);
            w.nil(); // lora_id
            w.str(medium);
            w.nil(); // lora_name
            w.nil(); // extra_keys
            w.uint(*group as u64);
            w.str(kind);
            if let Some(window) = window {
                w.uint(window);
            }
        }
        KvEvent::Removed {
            group,
            block_hashes,
        } => {
            w.array(4);
            w.str("BlockRemoved");
            hashes(w, block_hashes);
            w.str(medium);
            w.uint(*group as u64);
        }
        KvEvent::AllCleared => {
            w.array(1);
            w.str("AllBlocksCleared");
        }
    }
}

fn map_event(w: &mut Writer, e: &TieredEvent, groups: &[KvSpan]) {
    let medium = medium_name(e.medium);
    match &e.event {
        KvEvent::Stored {
            group,
            block_hashes,
            parent,
            token_ids,
            block_size,
        } => {
            let (kind, window) = group_kind(groups, *group);
            w.map(if window.is_some() { 11 } else { 10 });
            w.str("type");
            w.str("BlockStored");
            w.str("block_hashes");
            hashes(w, block_hashes);
            w.str("parent_block_hash");
            w.opt_uint(parent.map(|p| p.0));
            w.str("token_ids");
            tokens(w, token_ids);
            w.str("block_size");
            w.uint(*block_size as u64);
            w.str("lora_id");
            w.nil();
            w.str("medium");
            w.str(medium);
            w.str("lora_name");
            w.nil();
            w.str("group_idx");
            w.uint(*group as u64);
            w.str("kv_cache_spec_kind");
            w.str(kind);
            if let Some(window) = window {
                w.str("kv_cache_spec_sliding_window");
                w.uint(window);
            }
        }
        KvEvent::Removed {
            group,
            block_hashes,
        } => {
            w.map(4);
            w.str("type");
            w.str("BlockRemoved");
            w.str("block_hashes");
            hashes(w, block_hashes);
            w.str("medium");
            w.str(medium);
            w.str("group_idx");
            w.uint(*group as u64);
        }
        KvEvent::AllCleared => {
            w.map(1);
            w.str("type");
            w.str("AllBlocksCleared");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> TieredEvent {
        TieredEvent {
            medium: Medium::Memory,
            event: KvEvent::Stored {
                group: 0,
                block_hashes: vec![BlockHash(1), BlockHash(u64::MAX)],
                parent: None,
                token_ids: vec![5, 300],
                block_size: 1,
            },
        }
    }

    /// The bytes msgspec writes for `KVEventBatch(ts=1.5, events=[BlockStored(...)],
    /// data_parallel_rank=0)` with vLLM 0.23's array-like structs (group 0, full attention).
    #[test]
    fn a_stored_block_as_vllm_arrays() {
        let bytes = encode_batch(1.5, &[stored()], &[KvSpan::Full], Encoding::Array);
        let mut want = vec![0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x9b];
        want.extend([0xab]);
        want.extend(b"BlockStored");
        want.extend([0x92, 0x01, 0xcf]);
        want.extend([0xff; 8]);
        want.extend([0xc0, 0x92, 0x05, 0xcd, 0x01, 0x2c, 0x01, 0xc0, 0xa3]);
        want.extend(b"CPU");
        want.extend([0xc0, 0xc0, 0x00, 0xae]);
        want.extend(b"full_attention");
        want.push(0x00);
        assert_eq!(bytes, want);
    }

    #[test]
    fn a_window_group_carries_its_window_in_both_encodings() {
        let mut e = stored();
        if let KvEvent::Stored { group, .. } = &mut e.event {
            *group = 1;
        }
        let groups = [KvSpan::Full, KvSpan::Window(512)];
        let array = encode_batch(0.0, &[e.clone()], &groups, Encoding::Array);
        let map = encode_batch(0.0, &[e], &groups, Encoding::Map);
        for bytes in [array, map] {
            let text = String::from_utf8_lossy(&bytes);
            assert!(text.contains("sliding_window"));
            // 512 as a 16-bit unsigned integer.
            assert!(bytes.windows(3).any(|w| w == [0xcd, 0x02, 0x00]));
        }
    }

    #[test]
    fn removed_and_cleared_in_both_encodings() {
        let removed = TieredEvent {
            medium: Medium::Disk,
            event: KvEvent::Removed {
                group: 0,
                block_hashes: vec![BlockHash(7)],
            },
        };
        let cleared = TieredEvent {
            medium: Medium::Memory,
            event: KvEvent::AllCleared,
        };
        let events = [removed, cleared];
        let array = encode_batch(0.0, &events, &[KvSpan::Full], Encoding::Array);
        let mut tail = vec![0x94, 0xac];
        tail.extend(b"BlockRemoved");
        tail.extend([0x91, 0x07, 0xa4]);
        tail.extend(b"DISK");
        tail.extend([0x00, 0x91, 0xb0]);
        tail.extend(b"AllBlocksCleared");
        tail.push(0x00);
        assert!(array.ends_with(&tail), "{array:x?}");
        let map = encode_batch(0.0, &events, &[KvSpan::Full], Encoding::Map);
        let text = String::from_utf8_lossy(&map);
        for key in [
            "type",
            "BlockRemoved",
            "block_hashes",
            "medium",
            "AllBlocksCleared",
        ] {
            assert!(text.contains(key), "{key} missing");
        }
        assert_eq!(map[11], 0x84, "BlockRemoved is a map of 4");
    }
}
