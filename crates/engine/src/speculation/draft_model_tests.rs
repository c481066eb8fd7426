//! The draft model's cache over a real fixture: greedy drafts of the target's own weights are
//! its greedy continuation; rejected tokens' blocks come back; a long prompt is read in chunks;
//! a released sequence holds nothing.

use sluice_model::{KvCache, KvDtype, LoadOptions, Model};

use super::*;
use crate::testkit::fixture;

fn draft_model(num_blocks: usize) -> DraftModel {
    let model = Model::load(&fixture("llama"), &LoadOptions::default()).unwrap();
    let vocab = model.config().vocab_size;
    let kv = KvCache::new(model.config(), KvDtype::F32, 4, num_blocks);
    DraftModel::new(
        Box::new(crate::executor::ModelExecutor::new(model, kv)),
        vocab,
    )
}

fn ask(seq: SeqId, tokens: &[u32], max_tokens: usize) -> DraftRequest<'_> {
    DraftRequest {
        seq,
        tokens,
        max_tokens,
    }
}

#[test]
fn drafts_continue_where_the_last_call_left_off_and_rejected_blocks_come_back() {
    let mut d = draft_model(64);
    let prompt: Vec<u32> = (3..20).collect();
    let first = d.propose(&[ask(7, &prompt, 12)]).remove(0);
    assert_eq!(first.len(), 12);
    // 17 prompt tokens and 12 drafted: blocks of 4 for 29 positions.
    assert_eq!(d.num_used_blocks(), 8);
    // The same model drafting two tokens at a time gives the same greedy continuation.
    let mut again = draft_model(64);
    let mut tokens = prompt.clone();
    for _ in 0..6 {
        let two = again.propose(&[ask(1, &tokens, 2)]).remove(0);
        tokens.extend(two);
    }
    assert_eq!(&tokens[prompt.len()..], &first[..]);
    // The target kept two draft tokens, then wrote another: the cache drops the rest of the
    // draft (its blocks with it) and drafts on from there.
    let mut kept = [prompt.clone(), first[..2].to_vec()].concat();
    kept.push((first[2] + 1) % 100);
    let next = d.propose(&[ask(7, &kept, 1)]).remove(0);
    assert_eq!(next.len(), 1);
    // 20 tokens and one drafted: 6 blocks.
    assert_eq!(d.num_used_blocks(), 6);
    d.release(7);
    assert_eq!(d.num_used_blocks(), 0);
}

#[test]
fn a_long_prompt_is_read_over_several_calls_and_a_full_pool_or_context_drafts_nothing() {
    let mut d = draft_model(512);
    d.catch_up_tokens = 100;
    let prompt: Vec<u32> = (0..150).map(|t| t % 90 + 3).collect();
    let drafts = d.propose(&[ask(1, &prompt, 3), ask(2, &prompt[..10], 3)]);
    assert!(drafts[0].is_empty(), "the prompt is not read yet");
    assert_eq!(
        drafts[1].len(),
        3,
        "a short sequence drafts in the same call"
    );
    assert_eq!(d.propose(&[ask(1, &prompt, 3)])[0].len(), 3);
    // The fixture's context is 256 positions: 250 tokens and a draft of 10 do not fit. That
    // sequence gets no draft, and the others in the call still do (a pass past the context would
    // fail the whole batch).
    let long: Vec<u32> = (0..250).map(|t| t % 90 + 3).collect();
    for call in 0..4 {
        let drafts = d.propose(&[ask(3, &long, 10), ask(4, &prompt[..12], 3)]);
        assert!(drafts[0].is_empty(), "call {call}");
        assert_eq!(drafts[1].len(), 3, "call {call}");
    }
    // A pool of 4 blocks of 4 cannot hold 17 tokens: no draft, nothing held.
    let mut small = draft_model(4);
    assert!(small.propose(&[ask(1, &prompt[..17], 2)])[0].is_empty());
    assert_eq!(small.num_used_blocks(), 0);
}
