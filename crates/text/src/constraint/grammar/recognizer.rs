//! The pushdown recognizer of a [`Grammar`]'s sentences, one byte at a time.
//!
//! A configuration is the set of stacks the bytes so far can leave (a stack's top is the
//! grammar position to match next, below it where to go on in each enclosing rule; an empty
//! stack has matched the whole root). Stacks are kept expanded: every top is a byte range.
//! Configurations are interned in a table shared by a request's choices, so the recognizer's
//! state is one id and a (configuration, byte) step is computed once: a lazily built DFA over
//! the grammar's configurations. Every count is bounded (stacks per configuration, stack
//! depth, expansion work, configurations per request); a step past a bound is refused, so a
//! hostile grammar costs bounded time and memory rather than a stall.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::compile::{Elem, Grammar};
use crate::constraint::masks::Recognizer;

/// Most configurations one request's table holds (each costs 1 KiB of transitions).
pub const MAX_GRAMMAR_STATES: usize = 16 * 1024;
/// Most stacks in one configuration.
const MAX_STACKS: usize = 1024;
/// Deepest stack (nesting of rules not in tail position).
const MAX_STACK_DEPTH: usize = 256;
/// Most stacks one step may examine while expanding.
const MAX_EXPANSION: usize = 64 * 1024;
/// Most stack entries one request's table may hold in all its configurations, and may copy
/// while expanding in all its steps: what bounds a hostile grammar's memory and time.
const MAX_TABLE_ENTRIES: usize = 8 << 20;
const MAX_TABLE_WORK: usize = 64 << 20;

/// A transition not computed yet, and one that no configuration follows.
const UNKNOWN: u32 = u32::MAX;
const DEAD: u32 = u32::MAX - 1;

type Stack = Vec<u32>;

/// A grammar with the configurations its recognizers reached: what [`GrammarRecognizer`]
/// reads. One per request (its table grows with the configurations the request meets).
#[derive(Debug)]
pub struct GrammarStates {
    grammar: Arc<Grammar>,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    configs: Vec<Arc<[Stack]>>,
    ids: HashMap<Arc<[Stack]>, u32>,
    /// Per configuration, the next configuration by byte (`UNKNOWN`, `DEAD` or an id).
    next: Vec<[u32; 256]>,
    /// Per configuration: some stack is empty (the output may end here), and all are (it must).
    accepting: Vec<bool>,
    terminal: Vec<bool>,
    /// Stack entries held in `configs`, and copied by expansions so far.
    entries: usize,
    work: usize,
}

impl GrammarStates {
    /// A fresh table over `grammar`, holding its start configuration.
    pub fn new(grammar: Arc<Grammar>) -> Self {
        let mut table = Table::default();
        table.intern(start_stacks(&grammar).unwrap_or_default());
        GrammarStates {
            grammar,
            table: Mutex::new(table),
        }
    }

    /// Whether `text` is a whole sentence of the grammar (for tests and checks of output).
    pub fn is_match(&self, text: &[u8]) -> bool {
        GrammarRecognizer::start(self)
            .after(self, text)
            .is_some_and(|s| s.ended || s.after_byteless(self).is_some())
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Table {
    /// The id of configuration `stacks`; `DEAD` when the table is full.
    fn intern(&mut self, stacks: Vec<Stack>) -> u32 {
        if let Some(&id) = self.ids.get(&stacks[..]) {
            return id;
        }
        let entries: usize = stacks.iter().map(Vec::len).sum();
        if self.configs.len() >= MAX_GRAMMAR_STATES || self.entries + entries > MAX_TABLE_ENTRIES {
            return DEAD;
        }
        self.entries += entries;
        let id = self.configs.len() as u32;
        let stacks: Arc<[Stack]> = stacks.into();
        self.accepting.push(stacks.iter().any(Vec::is_empty));
        self.terminal
            .push(!stacks.is_empty() && stacks.iter().all(Vec::is_empty));
        self.ids.insert(Arc::clone(&stacks), id);
        self.configs.push(stacks);
        self.next.push([UNKNOWN; 256]);
        id
    }

    fn step(&mut self, grammar: &Grammar, config: u32, byte: u8) -> u32 {
        let known = self.next[config as usize][byte as usize];
        if known != UNKNOWN {
            return known;
        }
        if self.work > MAX_TABLE_WORK {
            return DEAD;
        }
        let mut stacks = Vec::new();
        let mut budget = MAX_EXPANSION;
        for stack in self.configs[config as usize].iter() {
            let Some(&top) = stack.last() else { continue };
            let Elem::Bytes(lo, hi) = grammar.elems[top as usize] else {
                continue;
            };
            if (lo..=hi).contains(&byte) {
                let mut moved = stack.clone();
                moved.pop();
                if grammar.elems[top as usize + 1] != Elem::End {
                    moved.push(top + 1);
                }
                expand(grammar, moved, &mut stacks, &mut budget);
            }
        }
        self.work += stacks.iter().map(|s| s.len() + 1).sum::<usize>() + (MAX_EXPANSION - budget);
        let next = match normalize(stacks) {
            Some(stacks) if budget > 0 => self.intern(stacks),
            _ => DEAD,
        };
        self.next[config as usize][byte as usize] = next;
        next
    }
}

/// The expanded stacks at the start of a sentence; `None` when there are none within the
/// bounds (the compiler refuses such a grammar).
pub(super) fn start_stacks(grammar: &Grammar) -> Option<Vec<Stack>> {
    let mut stacks = Vec::new();
    let mut budget = MAX_EXPANSION;
    for &alt in &grammar.alts[grammar.root as usize] {
        expand(grammar, vec![alt], &mut stacks, &mut budget);
    }
    normalize(stacks).filter(|_| budget > 0)
}

/// Sorted, without duplicates; `None` when empty or past the bound.
fn normalize(mut stacks: Vec<Stack>) -> Option<Vec<Stack>> {
    stacks.sort_unstable();
    stacks.dedup();
    (!stacks.is_empty() && stacks.len() <= MAX_STACKS).then_some(stacks)
}

/// Adds to `out` every expanded stack `stack` can become without reading a byte: rule
/// references on top are replaced by each of the rule's alternatives (the position after the
/// reference kept below, unless the reference ends its alternative), finished alternatives
/// popped. Stacks deeper than the bound are dropped; `budget` bounds the work.
fn expand(grammar: &Grammar, stack: Stack, out: &mut Vec<Stack>, budget: &mut usize) {
    let mut work = vec![stack];
    // A loop through empty-matching rules in tail position comes back to a stack already
    // seen: it adds nothing (left recursion that deepens the stack is refused when compiled).
    let mut seen = HashSet::new();
    while let Some(mut stack) = work.pop() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        if !seen.insert(stack.clone()) {
            continue;
        }
        let Some(&top) = stack.last() else {
            out.push(stack);
            continue;
        };
        match grammar.elems[top as usize] {
            Elem::Bytes(..) => out.push(stack),
            Elem::End => {
                stack.pop();
                work.push(stack);
            }
            Elem::Rule(rule) => {
                stack.pop();
                if grammar.elems[top as usize + 1] != Elem::End {
                    stack.push(top + 1);
                }
                if stack.len() >= MAX_STACK_DEPTH {
                    continue;
                }
                for &alt in &grammar.alts[rule as usize] {
                    let mut next = stack.clone();
                    next.push(alt);
                    work.push(next);
                }
            }
        }
    }
}

/// A configuration of a [`GrammarStates`] table: `Copy`, so masks are cached per state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrammarRecognizer {
    config: u32,
    /// The output is whole: only empty stacks are left, or end-of-sequence was taken where
    /// the root was matched.
    ended: bool,
}

impl Recognizer for GrammarRecognizer {
    type Rules = GrammarStates;

    fn start(states: &GrammarStates) -> Self {
        GrammarRecognizer {
            config: 0,
            ended: states.table().terminal.first().copied().unwrap_or(false),
        }
    }

    fn advance(&mut self, states: &GrammarStates, byte: u8) -> bool {
        if self.ended {
            return false;
        }
        let mut table = states.table();
        match table.step(&states.grammar, self.config, byte) {
            DEAD => false,
            next => {
                self.config = next;
                self.ended = table.terminal[next as usize];
                true
            }
        }
    }

    fn is_complete(&self) -> bool {
        self.ended
    }

    /// End-of-sequence may come where the root has been matched (and more could follow).
    fn after_byteless(&self, states: &GrammarStates) -> Option<Self> {
        let accepting = states.table().accepting[self.config as usize];
        (!self.ended && accepting).then_some(GrammarRecognizer {
            config: self.config,
            ended: true,
        })
    }
}
