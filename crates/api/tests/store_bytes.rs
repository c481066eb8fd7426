//! `json_heap_bytes`, the stored-response store's estimate of an entry's memory, against what
//! the allocator really hands out for parsed and built JSON: never below it (the byte budgets
//! hold), and not far above it (they are not spent on air). Its own binary, with a counting
//! global allocator, and one test, so that nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use sluice_api::responses_store::json_heap_bytes;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::SeqCst);
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        ALLOCATIONS.fetch_sub(1, Ordering::SeqCst);
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::SeqCst);
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes and allocations `make`'s value holds once built (temporaries freed).
fn measure(make: impl FnOnce() -> Value) -> (Value, usize, usize) {
    let (bytes, count) = (
        LIVE.load(Ordering::SeqCst),
        ALLOCATIONS.load(Ordering::SeqCst),
    );
    let value = make();
    let held = LIVE.load(Ordering::SeqCst) - bytes;
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - count;
    (value, held, allocations)
}

#[test]
fn the_estimate_bounds_what_json_values_hold_from_above_and_closely() {
    let metadata: serde_json::Map<String, Value> = (0..16)
        .map(|k| (format!("{k:064}"), json!("v".repeat(512))))
        .collect();
    let body = json!({"id": "resp_0123", "object": "response", "created_at": 1, "status":
        "completed", "error": null, "incomplete_details": null, "model": "m",
        "instructions": "be brief", "max_output_tokens": null, "parallel_tool_calls": true,
        "previous_response_id": null, "reasoning": {"effort": null, "summary": null},
        "store": true, "temperature": 1.0, "text": {"format": {"type": "text"}},
        "tool_choice": "auto", "top_p": 1.0, "truncation": "disabled", "user": null,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        "metadata": {"session": "abc"},
        "output": [{"type": "message", "id": "msg_1", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text",
            "text": "It is sunny in Paris today.", "annotations": [], "logprobs": []}]}],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 17}});
    let texts = [
        body.to_string(),
        json!({"metadata": metadata}).to_string(),
        json!([{"role": "user", "content": "x".repeat(100_000)}]).to_string(),
        format!("{}1{}", "[".repeat(20), "]".repeat(20)),
        serde_json::to_string(&(0..1000).collect::<Vec<_>>()).unwrap(),
        serde_json::to_string(
            &(0..300)
                .map(|i| (format!("k{i}"), i))
                .collect::<std::collections::HashMap<_, _>>(),
        )
        .unwrap(),
        json!([{"a": 1}, {"b": 2}, {"c": [1, 2, 3]}, {}, [], ""]).to_string(),
    ];
    for text in &texts {
        let (parsed, held, allocations) = measure(|| serde_json::from_str(text).unwrap());
        let estimate = json_heap_bytes(&parsed);
        println!(
            "{held} bytes in {allocations} allocations, estimated {estimate}: {:.60}",
            text
        );
        assert!(
            estimate >= held,
            "below the truth: {estimate} < {held} for {text:.200}"
        );
        // malloc's own 16 bytes a block, at most, are not in `held`.
        let with_malloc = held + 16 * allocations;
        assert!(
            estimate <= 2 * with_malloc,
            "far above the truth: {estimate} > 2 x {with_malloc} for {text:.200}"
        );
        // Built rather than parsed (the renderer's json! and to_value).
        let (built, held, _) = measure(|| parsed.clone());
        assert!(json_heap_bytes(&built) >= held, "{text:.200}");
    }
}
