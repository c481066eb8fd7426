//! Fair sharing of the running seats (`max_num_seqs`) between callers.
//!
//! A caller is whoever the API says sent a request (an API key, or the `user` field when the
//! server has one key or none; `None` is one anonymous caller). Each step the scheduler takes a
//! [`Shares`] census of the callers with work (running or waiting sequences). Every such caller
//! is owed `share = max_num_seqs / callers` seats (at least one, at most
//! `max_seqs_per_caller`). A caller *starves* while it has waiting sequences and runs fewer than
//! its share. Then:
//!
//! - while some caller starves, only starving callers are admitted (the others are deferred);
//! - a starving caller's sequence that finds no seat (or no blocks) may preempt, by recompute,
//!   the worst running sequence of a caller holding more than its share, but never one of
//!   better base priority than itself;
//! - when nobody starves, admission is by priority alone: a caller alone may take every seat
//!   (work-conserving), and seats the others do not use go to whoever waits.
//!
//! `max_seqs_per_caller` is also a hard cap: a caller never runs more, even on an idle server.
//!
//! Prompt tokens are shared the same way ([`PromptQuotas`]): a step's prompt budget (prefill
//! chunks and admissions) is split between the callers with prompt work by max-min fairness,
//! each getting what it asks for or an equal part of what the others leave, so one caller's
//! hundred long prompts (or a prompt scored row by row) never keep another's short prompt
//! waiting for all of them; a caller alone gets the whole budget.

use std::collections::HashMap;

use crate::request::Priority;

/// Who a sequence belongs to, for fair sharing (see `GenerationRequest::caller`).
pub type CallerId = Option<u64>;

/// How seats are shared between callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairShareConfig {
    /// Share seats between callers with work; off: admission by priority and arrival alone.
    pub enabled: bool,
    /// Most sequences one caller runs at once, whatever else waits; `None`: no cap.
    pub max_seqs_per_caller: Option<usize>,
}

impl Default for FairShareConfig {
    fn default() -> Self {
        FairShareConfig {
            enabled: true,
            max_seqs_per_caller: None,
        }
    }
}

/// One step's census of callers: running and waiting sequences per caller, and the share.
#[derive(Debug, Clone, Default)]
pub struct Shares {
    /// `(running, waiting)` sequences per caller with work.
    counts: HashMap<CallerId, (usize, usize)>,
    /// Seats owed to each caller while another starves.
    share: usize,
    /// Hard cap per caller.
    cap: usize,
    enabled: bool,
}

impl Shares {
    /// The census of `seqs`: `(caller, running)` for every unfinished sequence.
    pub fn new(
        config: FairShareConfig,
        max_num_seqs: usize,
        seqs: impl IntoIterator<Item = (CallerId, bool)>,
    ) -> Self {
        let mut counts: HashMap<CallerId, (usize, usize)> = HashMap::new();
        for (caller, running) in seqs {
            let entry = counts.entry(caller).or_default();
            if running {
                entry.0 += 1;
            } else {
                entry.1 += 1;
            }
        }
        let cap = config.max_seqs_per_caller.unwrap_or(usize::MAX).max(1);
        let share = (max_num_seqs / counts.len().max(1)).clamp(1, cap);
        Shares {
            counts,
            share,
            cap,
            enabled: config.enabled,
        }
    }

    /// Callers with running or waiting sequences.
    pub fn active_callers(&self) -> usize {
        self.counts.len()
    }

    /// Seats owed to each caller.
    pub fn share(&self) -> usize {
        self.share
    }

    /// Sequences `caller` runs.
    pub fn running(&self, caller: CallerId) -> usize {
        self.counts.get(&caller).map_or(0, |c| c.0)
    }

    /// Most sequences one caller runs.
    pub fn max_running(&self) -> usize {
        self.counts.values().map(|c| c.0).max().unwrap_or(0)
    }

    /// True when `caller` waits while running fewer than its share.
    pub fn starves(&self, caller: CallerId) -> bool {
        self.enabled
            && self
                .counts
                .get(&caller)
                .is_some_and(|&(running, waiting)| waiting > 0 && running < self.share)
    }

    fn anyone_starves(&self) -> bool {
        self.counts.keys().any(|&c| self.starves(c))
    }

    /// True when a waiting sequence of `caller` may be admitted now: under the cap, and either
    /// starving or nobody starves.
    pub fn may_admit(&self, caller: CallerId) -> bool {
        self.running(caller) < self.cap && (self.starves(caller) || !self.anyone_starves())
    }

    /// True when a running sequence of `victim_caller` (of priority `victim`) may be preempted
    /// for a waiting sequence of `caller` (of priority `waiting`): the waiting caller starves,
    /// the victim's holds more than its share, and the victim is not of better priority.
    pub fn may_preempt_for(
        &self,
        caller: CallerId,
        waiting: Priority,
        victim_caller: CallerId,
        victim: Priority,
    ) -> bool {
        self.starves(caller)
            && victim_caller != caller
            && self.running(victim_caller) > self.share
            && victim >= waiting
    }

    /// True when running sequences beyond a caller's share should sort after everyone's
    /// within-share ones (fairness on and more than one caller with work).
    pub fn ranks_running(&self) -> bool {
        self.enabled && self.counts.len() > 1
    }

    /// Records that a sequence of `caller` left the queue and runs.
    pub fn on_admit(&mut self, caller: CallerId) {
        let entry = self.counts.entry(caller).or_default();
        entry.0 += 1;
        entry.1 = entry.1.saturating_sub(1);
    }

    /// Records that a running sequence of `caller` went back to the queue.
    pub fn on_preempt(&mut self, caller: CallerId) {
        let entry = self.counts.entry(caller).or_default();
        entry.0 = entry.0.saturating_sub(1);
        entry.1 += 1;
    }

    /// Records that a waiting sequence of `caller` left without running (rejected).
    pub fn on_reject(&mut self, caller: CallerId) {
        if let Some(entry) = self.counts.get_mut(&caller) {
            entry.1 = entry.1.saturating_sub(1);
        }
    }
}

/// Prompt tokens each caller may compute in one step. Unlimited unless the step's prompt budget
/// is split between several callers with prompt work.
#[derive(Debug, Clone, Default)]
pub struct PromptQuotas {
    /// Tokens left per caller; `None`: no split.
    left: Option<HashMap<CallerId, usize>>,
}

impl PromptQuotas {
    /// No split: every caller may use the whole budget.
    pub fn unlimited() -> Self {
        PromptQuotas { left: None }
    }

    /// Splits `budget` prompt tokens between callers asking for `demands` by max-min fairness:
    /// callers asking less than an equal part get what they ask, the rest share what remains
    /// equally. With fewer than two callers asking, nothing is split.
    pub fn split(demands: HashMap<CallerId, usize>, budget: usize) -> Self {
        let mut asking: Vec<(CallerId, usize)> =
            demands.into_iter().filter(|&(_, d)| d > 0).collect();
        if asking.len() < 2 {
            return PromptQuotas::unlimited();
        }
        // Smallest demand first; ties in caller order, so the split is deterministic.
        asking.sort_by_key(|&(caller, demand)| (demand, caller));
        let mut remaining = budget;
        let mut left = HashMap::with_capacity(asking.len());
        let callers = asking.len();
        for (i, (caller, demand)) in asking.into_iter().enumerate() {
            let given = demand.min(remaining / (callers - i));
            remaining -= given;
            left.insert(caller, given);
        }
        PromptQuotas { left: Some(left) }
    }

    /// True when the budget is split between callers.
    pub fn is_split(&self) -> bool {
        self.left.is_some()
    }

    /// Prompt tokens `caller` may still compute this step.
    pub fn left(&self, caller: CallerId) -> usize {
        match &self.left {
            None => usize::MAX,
            Some(left) => left.get(&caller).copied().unwrap_or(0),
        }
    }

    /// Records `tokens` computed by `caller`.
    pub fn spend(&mut self, caller: CallerId, tokens: usize) {
        if let Some(left) = self.left.as_mut().and_then(|l| l.get_mut(&caller)) {
            *left = left.saturating_sub(tokens);
        }
    }

    /// Gives back `tokens` a preempted sequence of `caller` will not compute after all.
    pub fn refund(&mut self, caller: CallerId, tokens: usize) {
        if let Some(left) = self.left.as_mut().and_then(|l| l.get_mut(&caller)) {
            *left = left.saturating_add(tokens);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_tokens_split_max_min_fairly() {
        let demands = HashMap::from([(Some(1), 1000), (Some(2), 5), (Some(3), 1000)]);
        let q = PromptQuotas::split(demands, 105);
        assert!(q.is_split());
        assert_eq!(
            (q.left(Some(2)), q.left(Some(1)), q.left(Some(3))),
            (5, 50, 50)
        );
        assert_eq!(
            q.left(Some(9)),
            0,
            "a caller that asked nothing gets nothing"
        );
        let alone = PromptQuotas::split(HashMap::from([(Some(1), 1000), (Some(2), 0)]), 64);
        assert!(!alone.is_split());
        assert_eq!(alone.left(Some(1)), usize::MAX);
    }

    #[test]
    fn a_split_never_exceeds_the_budget() {
        let demands = HashMap::from([(Some(1), 7), (Some(2), 9), (Some(3), 11)]);
        let q = PromptQuotas::split(demands, 10);
        let given = [1, 2, 3].map(|c| q.left(Some(c)));
        assert_eq!(given.iter().sum::<usize>(), 10, "{given:?}");
        assert!(given.iter().all(|&g| g >= 3), "{given:?}");
    }

    fn census(seqs: &[(CallerId, bool)], max_num_seqs: usize) -> Shares {
        Shares::new(
            FairShareConfig::default(),
            max_num_seqs,
            seqs.iter().copied(),
        )
    }

    #[test]
    fn a_caller_alone_may_take_every_seat() {
        let seqs: Vec<_> = (0..10).map(|i| (Some(1), i < 4)).collect();
        let s = census(&seqs, 4);
        assert_eq!(s.share(), 4);
        assert!(s.may_admit(Some(1)));
    }

    #[test]
    fn a_caller_over_its_share_is_deferred_while_another_starves() {
        let mut seqs: Vec<_> = (0..6).map(|i| (Some(1), i < 4)).collect();
        seqs.push((Some(2), false));
        let s = census(&seqs, 4);
        assert_eq!(s.share(), 2);
        assert!(s.starves(Some(2)));
        assert!(!s.may_admit(Some(1)));
        assert!(s.may_admit(Some(2)));
        assert!(s.may_preempt_for(Some(2), Priority::Normal, Some(1), Priority::Normal));
        assert!(!s.may_preempt_for(Some(2), Priority::Normal, Some(1), Priority::High));
        assert!(!s.may_preempt_for(Some(1), Priority::Normal, Some(2), Priority::Normal));
    }

    #[test]
    fn nobody_starving_means_seats_go_by_priority() {
        // Caller 2 runs its share and waits for nothing: caller 1 may fill the rest.
        let seqs = [
            (Some(1), true),
            (Some(1), true),
            (Some(1), false),
            (Some(2), true),
        ];
        let s = census(&seqs, 4);
        assert!(s.may_admit(Some(1)));
        assert!(!s.may_preempt_for(Some(1), Priority::High, Some(2), Priority::Low));
    }

    #[test]
    fn the_cap_holds_even_for_a_caller_alone() {
        let seqs: Vec<_> = (0..5).map(|i| (None, i < 2)).collect();
        let config = FairShareConfig {
            enabled: true,
            max_seqs_per_caller: Some(2),
        };
        let s = Shares::new(config, 8, seqs);
        assert_eq!(s.share(), 2);
        assert!(!s.may_admit(None));
    }

    #[test]
    fn fairness_off_never_defers_nor_preempts() {
        let mut seqs: Vec<_> = (0..6).map(|i| (Some(1), i < 4)).collect();
        seqs.push((Some(2), false));
        let config = FairShareConfig {
            enabled: false,
            max_seqs_per_caller: None,
        };
        let s = Shares::new(config, 4, seqs);
        assert!(s.may_admit(Some(1)));
        assert!(!s.may_preempt_for(Some(2), Priority::Normal, Some(1), Priority::Normal));
    }
}
