//! The tokens a recognizer state accepts, found by walking a trie of the vocabulary's bytes: a byte the state refuses prunes every token under it, so a step visits only the
//! prefixes that stay valid (inside a string that is most of the trie; between tokens, a few
//! hundred nodes). Masks are cached per state: the states inside a string repeat all the time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use std::hash::Hash;

use super::JsonRecognizer;

/// A byte-at-a-time recognizer whose state is a small value: copied to try a byte, compared and
/// hashed to cache masks.
pub trait Recognizer: Copy + Eq + Hash + std::fmt::Debug + Send + Sync + 'static {
    /// What the state is read against (nothing for a plain JSON object; a compiled schema).
    type Rules: std::fmt::Debug + Send + Sync + ?Sized + 'static;

    /// The state at the start of the output.
    fn start(rules: &Self::Rules) -> Self;

    /// Consumes one byte; false when no valid output continues with it (the state is then
    /// meaningless).
    fn advance(&mut self, rules: &Self::Rules, byte: u8) -> bool;

    /// True once the output is whole; no byte is accepted after that.
    fn is_complete(&self) -> bool;

    /// The state after a token with no bytes (a special or control token, end-of-sequence
    /// among them), or `None` where such a token may not come: the default, since constrained
    /// output is text. A recognizer with stretches of free text allows them there.
    fn after_byteless(&self, _rules: &Self::Rules) -> Option<Self> {
        None
    }

    /// The state after `bytes`, or `None` if some byte is refused.
    fn after(mut self, rules: &Self::Rules, bytes: &[u8]) -> Option<Self> {
        bytes
            .iter()
            .all(|&b| self.advance(rules, b))
            .then_some(self)
    }
}

impl Recognizer for JsonRecognizer {
    type Rules = ();

    fn start(_: &()) -> Self {
        JsonRecognizer::new()
    }

    fn advance(&mut self, _: &(), byte: u8) -> bool {
        JsonRecognizer::advance(self, byte)
    }

    fn is_complete(&self) -> bool {
        JsonRecognizer::is_complete(self)
    }
}

/// Most masks kept; the cache is emptied when it fills (each is `vocab_size / 8` bytes).
const MAX_CACHED_MASKS: usize = 256;

/// A set of token ids as a bitset over the model's vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSet {
    words: Vec<u64>,
}

impl TokenSet {
    fn empty(vocab_size: usize) -> Self {
        TokenSet {
            words: vec![0; vocab_size.div_ceil(64)],
        }
    }

    fn insert(&mut self, id: u32) {
        self.words[id as usize / 64] |= 1 << (id % 64);
    }

    /// Whether `id` is in the set (ids past the vocabulary never are).
    pub fn contains(&self, id: u32) -> bool {
        self.words
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True when no id is in the set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
}

/// One trie node: the byte leading to it, its children and the tokens that end at it.
#[derive(Debug)]
struct Node {
    byte: u8,
    children: (u32, u32),
    tokens: (u32, u32),
}

/// A model's vocabulary as a byte trie, with each token's bytes; built once per model and shared
/// by every constraint.
#[derive(Debug)]
pub struct TokenTrie {
    /// Node 0 is the root; every node's children are contiguous.
    nodes: Vec<Node>,
    /// Token ids by node (`Node::tokens` indexes it).
    ends: Vec<u32>,
    /// Each token's bytes as it appears in text; `None` for special tokens, which never
    /// belong to constrained output.
    token_bytes: Vec<Option<Box<[u8]>>>,
    /// The tokens with no bytes, for states that allow them.
    byteless: Vec<u32>,
    vocab_size: usize,
}

impl TokenTrie {
    /// Builds the trie. `token_bytes[id]` is token `id`'s text as bytes (`None` for special
    /// tokens); `vocab_size` is the model's logit count, which may exceed the tokenizer's.
    pub fn new(token_bytes: Vec<Option<Vec<u8>>>, vocab_size: usize) -> Self {
        let token_bytes: Vec<Option<Box<[u8]>>> = token_bytes
            .into_iter()
            .take(vocab_size)
            .map(|b| b.filter(|b| !b.is_empty()).map(Vec::into_boxed_slice))
            .collect();
        let mut sorted: Vec<(&[u8], u32)> = token_bytes
            .iter()
            .enumerate()
            .filter_map(|(id, b)| Some((b.as_deref()?, id as u32)))
            .collect();
        sorted.sort_unstable();
        let mut nodes = vec![Node {
            byte: 0,
            children: (0, 0),
            tokens: (0, 0),
        }];
        let mut ends = Vec::with_capacity(sorted.len());
        // Breadth first, so each node's children are pushed together: (node, entries, depth),
        // where every entry in `entries` has the node's `depth` bytes as its prefix.
        let mut queue = std::collections::VecDeque::from([(0usize, 0..sorted.len(), 0usize)]);
        while let Some((node, entries, depth)) = queue.pop_front() {
            let mut i = entries.start;
            let first_token = ends.len() as u32;
            // Shorter entries sort first: those ending here lead the range.
            while i < entries.end && sorted[i].0.len() == depth {
                ends.push(sorted[i].1);
                i += 1;
            }
            nodes[node].tokens = (first_token, ends.len() as u32);
            let first_child = nodes.len() as u32;
            while i < entries.end {
                let byte = sorted[i].0[depth];
                let start = i;
                while i < entries.end && sorted[i].0[depth] == byte {
                    i += 1;
                }
                queue.push_back((nodes.len(), start..i, depth + 1));
                nodes.push(Node {
                    byte,
                    children: (0, 0),
                    tokens: (0, 0),
                });
            }
            nodes[node].children = (first_child, nodes.len() as u32);
        }
        let byteless = (0..token_bytes.len() as u32)
            .filter(|&id| token_bytes[id as usize].is_none())
            .collect();
        TokenTrie {
            nodes,
            ends,
            token_bytes,
            byteless,
            vocab_size,
        }
    }

    /// Token `id`'s bytes; `None` for special tokens and ids past the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.token_bytes.get(id as usize)?.as_deref()
    }

    /// The state after token `id`: by its bytes, or as a token with no bytes; `None` when
    /// `state` refuses it or `id` is past the vocabulary.
    fn after<R: Recognizer>(&self, rules: &R::Rules, state: R, id: u32) -> Option<R> {
        match self.token_bytes.get(id as usize)? {
            Some(bytes) => state.after(rules, bytes),
            None => state.after_byteless(rules),
        }
    }

    /// Every token `state` accepts whole.
    fn walk<R: Recognizer>(&self, rules: &R::Rules, state: R) -> TokenSet {
        let mut set = TokenSet::empty(self.vocab_size);
        if state.after_byteless(rules).is_some() {
            for &id in &self.byteless {
                set.insert(id);
            }
        }
        let mut stack = vec![(0usize, state)];
        while let Some((node, state)) = stack.pop() {
            let (first, last) = self.nodes[node].children;
            for child in first..last {
                let child = child as usize;
                let mut next = state;
                if !next.advance(rules, self.nodes[child].byte) {
                    continue;
                }
                let (a, b) = self.nodes[child].tokens;
                for &id in &self.ends[a as usize..b as usize] {
                    set.insert(id);
                }
                stack.push((child, next));
            }
        }
        set
    }
}

/// The masks of one kind of constraint over one vocabulary, cached per recognizer state.
#[derive(Debug)]
pub struct TokenMasks<R: Recognizer> {
    trie: Arc<TokenTrie>,
    rules: Arc<R::Rules>,
    cache: Mutex<HashMap<R, Arc<TokenSet>>>,
}

/// The masks of `json_object` mode.
pub type JsonTokenMasks = TokenMasks<JsonRecognizer>;

impl<R: Recognizer> TokenMasks<R> {
    /// Masks for states read against `rules`.
    pub fn new(trie: Arc<TokenTrie>, rules: Arc<R::Rules>) -> Self {
        TokenMasks {
            trie,
            rules,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// What the states are read against.
    pub fn rules(&self) -> &R::Rules {
        &self.rules
    }

    /// The state after token `id`, or `None` when the state refuses it.
    pub fn after_token(&self, state: R, id: u32) -> Option<R> {
        self.trie.after::<R>(&self.rules, state, id)
    }

    /// The tokens `state` accepts whole.
    pub fn allowed(&self, state: &R) -> Arc<TokenSet> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = cache.get(state) {
            return Arc::clone(set);
        }
        let set = Arc::new(self.trie.walk::<R>(&self.rules, *state));
        if cache.len() >= MAX_CACHED_MASKS {
            cache.clear();
        }
        cache.insert(*state, Arc::clone(&set));
        set
    }
}

impl JsonTokenMasks {
    /// The masks of `json_object` mode over `trie`.
    pub fn json_object(trie: Arc<TokenTrie>) -> Self {
        TokenMasks::new(trie, Arc::new(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vec<Option<Vec<u8>>> {
        let words: &[&str] = &[
            "{", "}", "{\"", "\"", "\":", ":", ",", " ", "\n", "a", "ab", "abc", "1", "12", "-",
            ".", "e", "true", "tr", "ue", "null", "\"}", "}}", "[", "]", "é", "\\", "\\n", "x\"",
        ];
        let mut v: Vec<Option<Vec<u8>>> =
            words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
        v.push(None); // a special token
        v.push(Some(vec![0xc3])); // half of "é"
        v.push(Some(vec![0xa9])); // the other half
        v
    }

    /// The trie walk finds exactly the tokens a brute-force check accepts, in many states.
    #[test]
    fn walk_equals_trying_every_token() {
        let tokens = vocab();
        let trie = Arc::new(TokenTrie::new(tokens.clone(), tokens.len() + 5));
        let masks = JsonTokenMasks::json_object(trie);
        let prefixes: [&[u8]; 17] = [
            b"",
            b"{ ",
            b"{",
            b"{\"",
            b"{\"a",
            b"{\"a\"",
            b"{\"a\":",
            b"{\"a\":1",
            b"{\"a\":-",
            b"{\"a\":1.",
            b"{\"a\":tr",
            b"{\"a\":[",
            b"{\"a\":[1,",
            b"{\"a\":\"\\",
            b"{\"a\":\"\xc3",
            b"{\"a\":{}",
            b"{\"a\":{}}",
        ];
        for prefix in prefixes {
            let state = JsonRecognizer::new().after(prefix).unwrap();
            let set = masks.allowed(&state);
            for (id, bytes) in tokens.iter().enumerate() {
                let expected = bytes.as_ref().is_some_and(|b| state.after(b).is_some());
                assert_eq!(
                    set.contains(id as u32),
                    expected,
                    "{:?} token {id} {bytes:?}",
                    String::from_utf8_lossy(prefix)
                );
            }
            assert!(
                !set.contains(tokens.len() as u32 + 2),
                "past the tokenizer's vocabulary"
            );
            // A cached mask is the same set.
            assert_eq!(*masks.allowed(&state), *set);
        }
        let done = JsonRecognizer::new().after(b"{}").unwrap();
        assert!(masks.allowed(&done).is_empty());
    }

    #[test]
    fn tokens_advance_the_state_by_their_bytes() {
        let masks = JsonTokenMasks::json_object(Arc::new(TokenTrie::new(vocab(), 40)));
        let mut state = JsonRecognizer::new();
        for id in [2, 9, 4, 7, 12, 1] {
            state = masks.after_token(state, id).unwrap();
        }
        assert!(state.is_complete());
        assert_eq!(
            masks.after_token(JsonRecognizer::new(), 29),
            None,
            "special token"
        );
    }
}
