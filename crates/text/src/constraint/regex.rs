//! `regex` and `choice` constraints (vLLM's `structured_outputs`, the older `guided_regex` /
//! `guided_choice`): the whole output matches a regular expression. The expression is parsed
//! by `regex-syntax` (so an error has a position), compiled to a dense DFA over bytes and
//! stepped one byte at a time: a recognizer state is one DFA state id. The DFA is built up
//! front within a size limit, so a pattern whose automaton would blow up (`(a|b)*a(a|b){30}`)
//! is refused at once rather than stalling a step.

use std::collections::VecDeque;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use thiserror::Error;

use super::masks::Recognizer;

/// Longest pattern accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 16 * 1024;

/// Most memory a compiled pattern's NFA and DFA may each take.
const MAX_AUTOMATON_BYTES: usize = 16 << 20;

/// Deepest nesting of groups and repetitions.
const MAX_NESTING: u32 = 64;

/// A pattern that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegexError {
    /// The pattern is not a valid regular expression.
    #[error("invalid regex at byte {offset} (line {line}, column {column}): {message}")]
    Syntax {
        /// Byte offset of the error in the pattern.
        offset: usize,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The pattern is valid but cannot be enforced: too long, or its automaton too large, or a
    /// feature a DFA cannot run (Unicode word boundaries).
    #[error("{0}")]
    Unsupported(String),
}

/// A compiled regular expression that the whole output must match.
pub struct Regex {
    pattern: String,
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    /// Per state (by index): what it allows; states never reached are dead ends.
    kinds: Vec<StateKind>,
    /// Per state (by index): the fewest characters (UTF-8 lead bytes) to a match; `u32::MAX`
    /// where none is reachable.
    chars_to_match: Vec<u32>,
    /// Per state (by index): the most characters a path to a match can take; `u32::MAX` where
    /// there is no bound (a loop on the way) or no match.
    most_chars_to_match: Vec<u32>,
}

/// Shown by its pattern (the DFA's tables would fill a log).
impl std::fmt::Debug for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Regex")
            .field("pattern", &self.pattern)
            .finish()
    }
}

/// Regexes are the same when their patterns are.
impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.pattern == other.pattern
    }
}

/// What a DFA state allows, found once when the regex is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateKind {
    /// No match can be reached from here. The DFA reports a match one byte late, so a state
    /// after a whole match's next byte is such a state without being the DFA's dead state.
    DeadEnd,
    /// A match can still be reached.
    Open,
    /// The bytes so far match, and more may follow.
    Matching,
    /// The bytes so far match and nothing may follow: the output is whole.
    Terminal,
}

impl Regex {
    /// Compiles `pattern`, anchored at both ends (the output is one whole match).
    pub fn compile(pattern: &str) -> Result<Regex, RegexError> {
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(RegexError::Unsupported(format!(
                "the regex is {} bytes long; at most {MAX_PATTERN_BYTES} are allowed",
                pattern.len()
            )));
        }
        let hir = regex_syntax::ParserBuilder::new()
            .nest_limit(MAX_NESTING)
            .build()
            .parse(pattern)
            .map_err(syntax_error)?;
        let too_large = |what: &str| {
            RegexError::Unsupported(format!(
                "the regex's {what} would take more than {} MiB; simplify the pattern (bounded \
                 repetitions multiply the states)",
                MAX_AUTOMATON_BYTES >> 20
            ))
        };
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(MAX_AUTOMATON_BYTES))
                    .shrink(false),
            )
            .build_from_hir(&hir)
            .map_err(|_| too_large("automaton"))?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .match_kind(MatchKind::All)
                    .dfa_size_limit(Some(MAX_AUTOMATON_BYTES))
                    .determinize_size_limit(Some(MAX_AUTOMATON_BYTES)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| match e.to_string().contains("quit") {
                true => RegexError::Unsupported(format!("the regex cannot be enforced: {e}")),
                false => too_large("DFA"),
            })?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| RegexError::Unsupported(format!("the regex cannot be enforced: {e}")))?;
        let (kinds, chars_to_match, most_chars_to_match) = state_kinds(&dfa, start);
        // Generation writes at least one token: a pattern must allow some non-empty text.
        match kinds[start.as_usize() >> dfa.stride2()] {
            StateKind::DeadEnd => {
                return Err(RegexError::Unsupported(
                    "the regex matches no text".to_string(),
                ))
            }
            StateKind::Terminal => {
                return Err(RegexError::Unsupported(
                    "the regex matches only the empty string".to_string(),
                ))
            }
            _ => {}
        }
        Ok(Regex {
            pattern: pattern.to_string(),
            dfa,
            start,
            kinds,
            chars_to_match,
            most_chars_to_match,
        })
    }

    /// A JSON Schema `pattern`: matched anywhere in the string, as ECMA-262's `test` does
    /// (anchor it with `^...$` to match the whole string). Errors point into `pattern`.
    pub fn compile_search(pattern: &str) -> Result<Regex, RegexError> {
        regex_syntax::ParserBuilder::new()
            .nest_limit(MAX_NESTING)
            .build()
            .parse(pattern)
            .map_err(syntax_error)?;
        let mut regex = Regex::compile(&format!("(?s:.)*(?:{pattern})(?s:.)*"))?;
        regex.pattern = pattern.to_string();
        Ok(regex)
    }

    /// A regex matching exactly one of `choices` (vLLM's `choice`).
    pub fn choice<S: AsRef<str>>(choices: &[S]) -> Result<Regex, RegexError> {
        Regex::compile(&Regex::choice_pattern(choices))
    }

    /// The pattern of [`Regex::choice`]: the literals, escaped, as alternatives.
    pub fn choice_pattern<S: AsRef<str>>(choices: &[S]) -> String {
        let alternatives: Vec<String> = choices
            .iter()
            .map(|c| regex_syntax::escape(c.as_ref()))
            .collect();
        alternatives.join("|")
    }

    /// The pattern this was compiled from.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Bytes the compiled form holds (its DFA, mostly).
    pub fn memory_usage(&self) -> usize {
        self.dfa.memory_usage() + self.kinds.len() + self.pattern.len()
    }

    fn kind(&self, state: StateID) -> StateKind {
        self.kinds[state.as_usize() >> self.dfa.stride2()]
    }

    /// The fewest characters that take `state` to a match (0 where the text so far matches).
    pub(crate) fn chars_to_match(&self, state: &RegexRecognizer) -> u32 {
        if state.ended {
            return 0;
        }
        self.chars_to_match[state.state.as_usize() >> self.dfa.stride2()]
    }

    /// The most characters that take `state` to a match (`u32::MAX`: no bound).
    pub(crate) fn most_chars_to_match(&self, state: &RegexRecognizer) -> u32 {
        if state.ended {
            return 0;
        }
        self.most_chars_to_match[state.state.as_usize() >> self.dfa.stride2()]
    }

    /// The most characters of a whole match (`u32::MAX`: no bound).
    pub(crate) fn longest_match_chars(&self) -> u32 {
        self.most_chars_to_match(&RegexRecognizer::start(self))
    }

    /// The fewest characters of a whole match.
    pub(crate) fn shortest_match_chars(&self) -> u32 {
        self.chars_to_match(&RegexRecognizer::start(self))
    }

    /// Whether `text` is one whole match (for tests and callers that check output).
    pub fn is_match(&self, text: &[u8]) -> bool {
        RegexRecognizer::start(self)
            .after(self, text)
            .is_some_and(|state| state.ended || state.after_byteless(self).is_some())
    }
}

/// The kind of every state reachable from `start` (forward to find them, then backward from
/// the matching ones to find those that reach a match), and the fewest characters from each
/// to a match.
fn state_kinds(dfa: &dense::DFA<Vec<u32>>, start: StateID) -> (Vec<StateKind>, Vec<u32>, Vec<u32>) {
    let index = |id: StateID| id.as_usize() >> dfa.stride2();
    // Indexes are below the transition table's length over its stride.
    let states = dfa.memory_usage() / 4 / dfa.stride() + 1;
    let mut kinds = vec![StateKind::DeadEnd; states];
    let mut seen = vec![false; states];
    seen[index(start)] = true;
    let mut queue = VecDeque::from([start]);
    let mut edges = Vec::new();
    while let Some(state) = queue.pop_front() {
        for byte in 0..=255u8 {
            let next = dfa.next_state(state, byte);
            if dfa.is_dead_state(next) || dfa.is_quit_state(next) {
                continue;
            }
            // A byte starts a character unless it continues a UTF-8 sequence.
            let starts_char = !(0x80..0xC0).contains(&byte);
            edges.push((index(state), index(next), starts_char));
            if !std::mem::replace(&mut seen[index(next)], true) {
                queue.push_back(next);
            }
        }
        if dfa.is_match_state(dfa.next_eoi_state(state)) {
            kinds[index(state)] = StateKind::Terminal;
        }
    }
    // Backward: a state reaches a match if a successor does.
    let mut reaches: Vec<bool> = kinds.iter().map(|&k| k == StateKind::Terminal).collect();
    loop {
        let mut changed = false;
        for &(from, to, _) in &edges {
            if reaches[to] && !reaches[from] {
                reaches[from] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // Fewest characters to a match: shortest paths back from the matching states, where a
    // byte that continues a character costs nothing (0-1 breadth-first search).
    let mut chars = vec![u32::MAX; states];
    let mut into: Vec<Vec<(usize, bool)>> = vec![Vec::new(); states];
    for &(from, to, starts_char) in &edges {
        into[to].push((from, starts_char));
    }
    let mut queue: VecDeque<usize> = VecDeque::new();
    for (i, kind) in kinds.iter().enumerate() {
        if *kind == StateKind::Terminal {
            chars[i] = 0;
            queue.push_back(i);
        }
    }
    while let Some(to) = queue.pop_front() {
        for &(from, starts_char) in &into[to] {
            let through = chars[to] + u32::from(starts_char);
            if through < chars[from] {
                chars[from] = through;
                match starts_char {
                    true => queue.push_back(from),
                    false => queue.push_front(from),
                }
            }
        }
    }
    // Most characters to a match: longest paths among the states that reach one, finished from
    // the matching ends backwards; a state on or before a loop never finishes (no bound).
    let mut most = vec![u32::MAX; states];
    let mut best = vec![0u32; states];
    let mut waiting = vec![0usize; states];
    for &(from, to, _) in &edges {
        if reaches[from] && reaches[to] {
            waiting[from] += 1;
        }
    }
    let mut done: Vec<usize> = (0..states)
        .filter(|&i| reaches[i] && waiting[i] == 0)
        .collect();
    for &i in &done {
        most[i] = 0;
    }
    while let Some(to) = done.pop() {
        for &(from, starts_char) in &into[to] {
            if !reaches[from] {
                continue;
            }
            best[from] = best[from].max(most[to].saturating_add(u32::from(starts_char)));
            waiting[from] -= 1;
            if waiting[from] == 0 {
                most[from] = best[from];
                done.push(from);
            }
        }
    }
    for &(from, to, _) in &edges {
        if reaches[to] {
            kinds[from] = match kinds[from] {
                StateKind::Terminal | StateKind::Matching => StateKind::Matching,
                _ => StateKind::Open,
            };
        }
    }
    (kinds, chars, most)
}

fn syntax_error(e: regex_syntax::Error) -> RegexError {
    let (span, message) = match &e {
        regex_syntax::Error::Parse(e) => (*e.span(), e.kind().to_string()),
        regex_syntax::Error::Translate(e) => (*e.span(), e.kind().to_string()),
        _ => return RegexError::Unsupported(e.to_string()),
    };
    RegexError::Syntax {
        offset: span.start.offset,
        line: span.start.line,
        column: span.start.column,
        message,
    }
}

/// A position in a [`Regex`]'s DFA: `Copy`, so masks are cached per state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegexRecognizer {
    state: StateID,
    /// The output is whole: a terminal state, or a token with no bytes (end-of-sequence) was
    /// taken where the output matched.
    ended: bool,
}

impl RegexRecognizer {
    /// Whether the bytes so far are a whole match.
    pub(crate) fn matches(&self, regex: &Regex) -> bool {
        self.ended || self.after_byteless(regex).is_some()
    }
}

impl Recognizer for RegexRecognizer {
    type Rules = Regex;

    fn start(regex: &Regex) -> Self {
        RegexRecognizer {
            state: regex.start,
            ended: regex.kind(regex.start) == StateKind::Terminal,
        }
    }

    fn advance(&mut self, regex: &Regex, byte: u8) -> bool {
        if self.ended {
            return false;
        }
        let next = regex.dfa.next_state(self.state, byte);
        if regex.dfa.is_dead_state(next) || regex.dfa.is_quit_state(next) {
            return false;
        }
        match regex.kind(next) {
            StateKind::DeadEnd => false,
            kind => {
                self.state = next;
                self.ended = kind == StateKind::Terminal;
                true
            }
        }
    }

    fn is_complete(&self) -> bool {
        self.ended
    }

    /// End-of-sequence may come where the output so far is a whole match (and is not yet
    /// whole: nothing comes after that).
    fn after_byteless(&self, regex: &Regex) -> Option<Self> {
        let matches = regex.kind(self.state) == StateKind::Matching;
        (!self.ended && matches).then_some(RegexRecognizer {
            state: self.state,
            ended: true,
        })
    }
}
