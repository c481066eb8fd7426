//! A request's stop strings compiled once into an Aho-Corasick automaton and shared by all of
//! its choices: feeding one byte costs amortized O(1) however many stop strings there are,
//! where scanning every string per token made a list of 100,000 stall the engine thread.
//!
//! The automaton is written here rather than taken from the `aho-corasick` crate because the
//! matcher needs what that crate does not expose: the depth of the current state, i.e. the
//! longest suffix of the text so far that could still grow into a stop string (that text must
//! be held back from the client).

use std::sync::Arc;

/// State index; the root (empty string) is 0.
type StateId = u32;

const ROOT: StateId = 0;

#[derive(Debug, Default)]
struct State {
    /// Outgoing trie edges, sorted by byte.
    next: Vec<(u8, StateId)>,
    /// The longest proper suffix of this state's string that is also a state.
    fail: StateId,
    /// Length of this state's string.
    depth: u32,
    /// The longest stop string that ends here (this state's string or one of its suffixes):
    /// (its length, its index in the list). Equal strings keep the first index.
    longest_match: Option<(u32, u32)>,
}

#[derive(Debug)]
struct Automaton {
    patterns: Vec<String>,
    states: Vec<State>,
}

/// Compiled stop strings. Cloning shares the automaton.
#[derive(Debug, Clone)]
pub struct StopSet {
    inner: Arc<Automaton>,
}

impl Default for StopSet {
    fn default() -> Self {
        StopSet::new(Vec::new())
    }
}

impl PartialEq for StopSet {
    fn eq(&self, other: &Self) -> bool {
        self.inner.patterns == other.inner.patterns
    }
}

impl Eq for StopSet {}

impl StopSet {
    /// Compiles `patterns`; empty strings are dropped (they would match before any text).
    /// Costs O(total bytes) time and memory.
    pub fn new(patterns: Vec<String>) -> StopSet {
        let patterns: Vec<String> = patterns.into_iter().filter(|p| !p.is_empty()).collect();
        let mut states = vec![State::default()];
        for (index, pattern) in patterns.iter().enumerate() {
            let mut at = ROOT;
            for &byte in pattern.as_bytes() {
                at = match child(&states[at as usize], byte) {
                    Some(next) => next,
                    None => {
                        let id = states.len() as StateId;
                        let depth = states[at as usize].depth + 1;
                        states.push(State {
                            depth,
                            ..State::default()
                        });
                        let edges = &mut states[at as usize].next;
                        let slot = edges.partition_point(|&(b, _)| b < byte);
                        edges.insert(slot, (byte, id));
                        id
                    }
                };
            }
            let end = &mut states[at as usize];
            end.longest_match
                .get_or_insert((pattern.len() as u32, index as u32));
        }
        link_failures(&mut states);
        StopSet {
            inner: Arc::new(Automaton { patterns, states }),
        }
    }

    /// True when there is no stop string.
    pub fn is_empty(&self) -> bool {
        self.inner.patterns.is_empty()
    }

    /// The stop strings, in the order given (empty ones dropped).
    pub fn patterns(&self) -> &[String] {
        &self.inner.patterns
    }

    /// The state after reading `byte` in `state`.
    fn step(&self, mut state: StateId, byte: u8) -> StateId {
        let states = &self.inner.states;
        loop {
            if let Some(next) = child(&states[state as usize], byte) {
                return next;
            }
            if state == ROOT {
                return ROOT;
            }
            state = states[state as usize].fail;
        }
    }
}

fn child(state: &State, byte: u8) -> Option<StateId> {
    state
        .next
        .binary_search_by_key(&byte, |&(b, _)| b)
        .ok()
        .map(|i| state.next[i].1)
}

/// Breadth-first: a state's failure link is found from its parent's, and its longest match is
/// its own pattern or else its failure state's longest match.
fn link_failures(states: &mut [State]) {
    let mut queue = std::collections::VecDeque::new();
    for &(_, first) in &states[ROOT as usize].next {
        queue.push_back(first);
    }
    while let Some(parent) = queue.pop_front() {
        let edges = states[parent as usize].next.clone();
        for (byte, id) in edges {
            let mut f = states[parent as usize].fail;
            let fail = loop {
                if let Some(next) = child(&states[f as usize], byte) {
                    break next;
                }
                if f == ROOT {
                    break ROOT;
                }
                f = states[f as usize].fail;
            };
            let inherited = states[fail as usize].longest_match;
            let state = &mut states[id as usize];
            state.fail = fail;
            if state.longest_match.is_none() {
                state.longest_match = inherited;
            }
            queue.push_back(id);
        }
    }
}

/// Where one choice's text is in the automaton. Byte positions count from the start of the
/// choice's text.
#[derive(Debug, Clone)]
pub(crate) struct StopScan {
    set: StopSet,
    state: StateId,
    /// Bytes read so far.
    len: usize,
    /// The earliest-starting stop found so far: (start, pattern index).
    first: Option<(usize, u32)>,
}

impl StopScan {
    pub(crate) fn new(set: StopSet) -> StopScan {
        StopScan {
            set,
            state: ROOT,
            len: 0,
            first: None,
        }
    }

    /// Reads `text`, remembering the earliest-starting stop string seen.
    pub(crate) fn feed(&mut self, text: &str) {
        for &byte in text.as_bytes() {
            self.state = self.set.step(self.state, byte);
            self.len += 1;
            if let Some((len, index)) = self.set.inner.states[self.state as usize].longest_match {
                let found = (self.len - len as usize, index);
                if self.first.is_none_or(|first| found < first) {
                    self.first = Some(found);
                }
            }
        }
    }

    /// The earliest-starting stop string found: (start, pattern index).
    pub(crate) fn first_match(&self) -> Option<(usize, u32)> {
        self.first
    }

    /// Where the longest suffix of the text that is a prefix of some stop string begins: no
    /// stop string starting before it can still complete. Always on a character boundary
    /// (stop strings are UTF-8, so none begins with a continuation byte).
    pub(crate) fn open_from(&self) -> usize {
        self.len - self.set.inner.states[self.state as usize].depth as usize
    }

    /// The stop string with this index.
    pub(crate) fn pattern(&self, index: u32) -> &str {
        &self.set.inner.patterns[index as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(stops: &[&str], text: &str) -> StopScan {
        let mut scan = StopScan::new(StopSet::new(stops.iter().map(|s| s.to_string()).collect()));
        scan.feed(text);
        scan
    }

    #[test]
    fn finds_the_earliest_starting_stop_and_the_first_listed_among_equals() {
        assert_eq!(
            scan(&["world", "lo w"], "hello world").first_match(),
            Some((3, 1))
        );
        assert_eq!(scan(&["ab", "ab"], "xab").first_match(), Some((1, 0)));
        assert_eq!(scan(&["b", "abc"], "xabc").first_match(), Some((1, 1)));
        assert_eq!(scan(&["zz"], "abc").first_match(), None);
    }

    #[test]
    fn open_from_is_the_longest_suffix_that_may_still_become_a_stop() {
        let s = scan(&["</s>", "abc"], "text </");
        assert_eq!(s.open_from(), 5);
        assert_eq!(scan(&["</s>"], "text").open_from(), 4);
        // "ab" is a prefix of "abc" even though "b" alone is not of anything.
        assert_eq!(scan(&["abc", "bd"], "xab").open_from(), 1);
    }

    #[test]
    fn a_hundred_thousand_stops_cost_one_state_step_per_byte() {
        let stops: Vec<String> = (0..100_000).map(|i| format!("stop{i}!")).collect();
        let set = StopSet::new(stops);
        let mut s = StopScan::new(set);
        s.feed(&"generated text without any of them ".repeat(100));
        assert_eq!(s.first_match(), None);
        s.feed("... stop99999!");
        assert_eq!(s.first_match().map(|(_, i)| i), Some(99_999));
    }
}
