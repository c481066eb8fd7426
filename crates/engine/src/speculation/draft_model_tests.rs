//! The draft model's cache over a real fixture: greedy drafts of the target's own weights are
//! its greedy continuation, written at the target's block ids; a changed table or rejected
//! tokens are computed again; a long prompt is read in chunks; a released sequence holds
//! nothing.

use sluice_model::{KvCache, KvDtype, LoadOptions, Model};

use super::*;
use crate::testkit::fixture;

fn draft_model(num_blocks: usize) -> DraftModel {
    let model = Model::load(&fixture("llama"), &LoadOptions::default()).unwrap();
    let vocab = model.config().vocab_size;
    let kv = KvCache::new(model.config(), KvDtype::F32, 4, num_blocks);
    let executor = crate::executor::ModelExecutor::new(model, kv);
    DraftModel::new(Box::new(executor), vocab, num_blocks).unwrap()
}

fn ask<'a>(
    seq: SeqId,
    tokens: &'a [u32],
    blocks: &'a [u32],
    max_tokens: usize,
) -> DraftRequest<'a> {
    DraftRequest {
        seq,
        tokens,
        blocks,
        max_tokens,
    }
}

/// What a fresh draft model proposes for `tokens` (blocks 0, 1, 2, ...).
fn fresh_draft(tokens: &[u32], max_tokens: usize) -> Vec<u32> {
    let blocks: Vec<u32> = (0..64).collect();
    draft_model(64)
        .propose(&[ask(1, tokens, &blocks, max_tokens)])
        .remove(0)
}

#[test]
fn drafts_continue_where_the_last_call_left_off_at_the_targets_block_ids() {
    let mut d = draft_model(64);
    let prompt: Vec<u32> = (3..20).collect();
    // The target's table, in no particular order: 17 prompt tokens and 12 drafted need 8
    // blocks of 4.
    let table: Vec<u32> = vec![40, 3, 17, 9, 60, 22, 5, 31];
    let first = d.propose(&[ask(7, &prompt, &table, 12)]).remove(0);
    assert_eq!(first.len(), 12);
    assert_eq!(first, fresh_draft(&prompt, 12));
    // The same model drafting two tokens at a time gives the same greedy continuation.
    let mut again = draft_model(64);
    let mut tokens = prompt.clone();
    for _ in 0..6 {
        let two = again.propose(&[ask(1, &tokens, &table, 2)]).remove(0);
        tokens.extend(two);
    }
    assert_eq!(&tokens[prompt.len()..], &first[..]);
    // The target kept two draft tokens, then wrote another: the cache drops the rest of the
    // draft and drafts on from there, as a model that never saw the rejected tokens does.
    let mut kept = [prompt.clone(), first[..2].to_vec()].concat();
    kept.push((first[2] + 1) % 100);
    let next = d.propose(&[ask(7, &kept, &table[..6], 3)]).remove(0);
    assert_eq!(next, fresh_draft(&kept, 3));
    d.release(7);
    assert_eq!(d.num_sequences(), 0);
}

#[test]
fn a_table_with_other_blocks_is_computed_again_and_a_shared_prefix_block_stays_valid() {
    let mut d = draft_model(64);
    let prompt: Vec<u32> = (0..23).map(|t| t * 7 % 90 + 3).collect();
    let table: Vec<u32> = (0..10).collect();
    let first = d.propose(&[ask(1, &prompt, &table, 12)]).remove(0);
    // Another sequence's keys and values fill blocks 20 to 29, then it leaves.
    let stranger: Vec<u32> = (0..23).map(|t| t * 11 % 97 + 2).collect();
    let moved: Vec<u32> = (20..30).collect();
    d.propose(&[ask(2, &stranger, &moved, 12)]);
    d.release(2);
    // Re-admitted after a preemption, the first sequence's positions are in those blocks: the
    // cache computes them again (reading them as its own would read the stranger's).
    assert_eq!(d.propose(&[ask(1, &prompt, &moved, 12)]).remove(0), first);
    // A second sequence shares the first four blocks (16 tokens) through the prefix cache and
    // writes them again with the same values: the first sequence's next draft is unchanged.
    let other = [&prompt[..16], &[5, 6, 7, 8, 9]].concat();
    let shared: Vec<u32> = [&moved[..4], &[40, 41, 42, 43]].concat();
    let drafts = d.propose(&[ask(3, &other, &shared, 3), ask(1, &prompt, &moved, 12)]);
    assert_eq!(drafts[0], fresh_draft(&other, 3));
    assert_eq!(drafts[1], first);
}

#[test]
fn a_long_prompt_is_read_over_several_calls_and_a_short_table_or_context_drafts_nothing() {
    let mut d = draft_model(512);
    d.catch_up_tokens = 100;
    let prompt: Vec<u32> = (0..150).map(|t| t % 90 + 3).collect();
    let (a, b, c): (Vec<u32>, Vec<u32>, Vec<u32>) =
        ((0..40).collect(), (40..80).collect(), (80..160).collect());
    let drafts = d.propose(&[ask(1, &prompt, &a, 3), ask(2, &prompt[..10], &b, 3)]);
    assert!(drafts[0].is_empty(), "the prompt is not read yet");
    assert_eq!(
        drafts[1].len(),
        3,
        "a short sequence drafts in the same call"
    );
    assert_eq!(
        d.propose(&[ask(1, &prompt, &a, 3)])[0],
        fresh_draft(&prompt, 3)
    );
    // The fixture's context is 256 positions: 250 tokens and a draft of 10 do not fit. That
    // sequence gets no draft, and the others in the call still do (a pass past the context would
    // fail the whole batch).
    let long: Vec<u32> = (0..250).map(|t| t % 90 + 3).collect();
    for call in 0..4 {
        let drafts = d.propose(&[ask(3, &long, &c, 10), ask(4, &prompt[..12], &b, 3)]);
        assert!(drafts[0].is_empty(), "call {call}");
        assert_eq!(drafts[1].len(), 3, "call {call}");
    }
    // A table of 4 blocks of 4 cannot hold 17 tokens and a draft: no draft.
    assert!(d.propose(&[ask(5, &prompt[..17], &a[..4], 2)])[0].is_empty());
}

#[test]
fn a_draft_cache_smaller_than_the_targets_pool_is_refused() {
    let model = Model::load(&fixture("llama"), &LoadOptions::default()).unwrap();
    let vocab = model.config().vocab_size;
    let kv = KvCache::new(model.config(), KvDtype::F32, 4, 16);
    let executor = crate::executor::ModelExecutor::new(model, kv);
    let error = DraftModel::new(Box::new(executor), vocab, 32).unwrap_err();
    assert!(error.contains("fewer than the model's 32"), "{error}");
}
