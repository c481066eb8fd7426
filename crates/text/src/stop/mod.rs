//! Stop strings over streamed text: finds a stop string even when it arrives split over several
//! tokens, holds back only the text that could still turn out to be the start of one, and never
//! lets any part of the stop string out.

mod set;

use set::StopScan;
pub use set::StopSet;

/// What one [`StopMatcher::push`] releases.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StopStatus {
    /// Text that is now certain to come before any stop string; send it to the client.
    pub emit: String,
    /// A stop string has been found; `emit` holds the last text before it, and generation
    /// should end with finish reason `stop`.
    pub stopped: bool,
}

/// Scans generated text for the first occurrence of any of a request's stop strings.
///
/// Each byte of text advances a shared Aho-Corasick automaton ([`StopSet`]) once, so the cost
/// per token does not grow with the number of stop strings.
#[derive(Debug, Clone)]
pub struct StopMatcher {
    scan: StopScan,
    /// Text received but not yet emitted: it starts at byte `held_from` of the choice's text and
    /// is either a suffix that may still become a stop string, or (while a longer stop string
    /// starting earlier is still possible) everything from that string's start. Empty once
    /// stopped.
    held: String,
    held_from: usize,
    matched: Option<u32>,
}

impl StopMatcher {
    /// A matcher for a compiled set of stop strings.
    pub fn new(stops: StopSet) -> StopMatcher {
        StopMatcher {
            scan: StopScan::new(stops),
            held: String::new(),
            held_from: 0,
            matched: None,
        }
    }

    /// Feeds the next piece of generated text. Once a stop string has been found, every later
    /// push returns `stopped: true` with nothing to emit.
    pub fn push(&mut self, text: &str) -> StopStatus {
        if self.matched.is_some() {
            return StopStatus {
                emit: String::new(),
                stopped: true,
            };
        }
        self.held.push_str(text);
        self.scan.feed(text);
        let open = self.scan.open_from();
        match self.scan.first_match() {
            // A longer stop may still begin before `at`; if it completes, it comes first.
            Some((at, _)) if open < at => StopStatus {
                emit: self.release_until(open),
                stopped: false,
            },
            Some((at, index)) => self.stop_at(at, index),
            None => StopStatus {
                emit: self.release_until(open),
                stopped: false,
            },
        }
    }

    /// Releases the held text when generation ends for another reason (EOS, length). Returns
    /// nothing after a stop string was found.
    ///
    /// A stop string held back because a longer one starting earlier was still possible is
    /// final now: the text ends before it and `stopped` is set.
    pub fn finish(&mut self) -> StopStatus {
        if self.matched.is_some() {
            self.held.clear();
            return StopStatus {
                emit: String::new(),
                stopped: true,
            };
        }
        match self.scan.first_match() {
            Some((at, index)) => self.stop_at(at, index),
            None => StopStatus {
                emit: std::mem::take(&mut self.held),
                stopped: false,
            },
        }
    }

    /// Emits the held text before byte `at` of the choice's text and keeps the rest.
    fn release_until(&mut self, at: usize) -> String {
        let cut = at.saturating_sub(self.held_from).min(self.held.len());
        let rest = self.held.split_off(cut);
        self.held_from += cut;
        std::mem::replace(&mut self.held, rest)
    }

    fn stop_at(&mut self, at: usize, index: u32) -> StopStatus {
        self.matched = Some(index);
        let emit = self.release_until(at);
        self.held.clear();
        StopStatus {
            emit,
            stopped: true,
        }
    }

    /// The stop string that ended the text, if one did.
    pub fn matched_stop(&self) -> Option<&str> {
        self.matched.map(|index| self.scan.pattern(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut matcher =
            StopMatcher::new(StopSet::new(stops.iter().map(|s| s.to_string()).collect()));
        let mut out = String::new();
        for piece in pieces {
            let status = matcher.push(piece);
            out.push_str(&status.emit);
            if status.stopped {
                return (out + &matcher.finish().emit, true);
            }
        }
        let last = matcher.finish();
        (out + &last.emit, last.stopped)
    }

    #[test]
    fn a_longer_stop_starting_earlier_wins_over_a_shorter_one_found_first() {
        // " " completes at byte 4 while "🙂 🙂" (starting at 0) is still possible.
        assert_eq!(
            run(&["🙂 🙂", " "], &["🙂 ", "🙂a a"]),
            (String::new(), true)
        );
        assert_eq!(
            run(&["🙂 🙂", " "], &["🙂 ", "a"]),
            ("🙂".to_string(), true)
        );
        assert_eq!(run(&["🙂 🙂", " "], &["🙂 "]), ("🙂".to_string(), true));
    }

    #[test]
    fn stop_string_split_over_three_pushes_is_found_and_not_leaked() {
        let mut matcher = StopMatcher::new(StopSet::new(vec!["###".into()]));
        assert_eq!(matcher.push("answer #").emit, "answer ");
        let second = matcher.push("#");
        assert_eq!((second.emit.as_str(), second.stopped), ("", false));
        let third = matcher.push("# trailing");
        assert_eq!((third.emit.as_str(), third.stopped), ("", true));
        assert_eq!(matcher.matched_stop(), Some("###"));
        assert_eq!(matcher.finish().emit, "");
        assert!(matcher.push("more").stopped);
    }

    #[test]
    fn held_text_is_released_when_the_prefix_does_not_continue_into_a_stop() {
        let mut matcher = StopMatcher::new(StopSet::new(vec!["</s>".into()]));
        assert_eq!(matcher.push("a </").emit, "a ");
        assert_eq!(matcher.push("b>").emit, "</b>");
        assert_eq!(matcher.push("</").emit, "");
        assert_eq!(matcher.finish().emit, "</");
        assert_eq!(matcher.matched_stop(), None);
    }

    #[test]
    fn earliest_occurrence_wins_among_several_stops() {
        assert_eq!(
            run(&["world", "lo w"], &["hello world"]),
            ("hel".into(), true)
        );
        assert_eq!(run(&["b", "abc"], &["xa", "bc"]), ("x".into(), true));
    }

    #[test]
    fn only_a_possible_stop_prefix_is_held_back() {
        let mut matcher = StopMatcher::new(StopSet::new(vec!["STOP".into()]));
        assert_eq!(matcher.push("no stop here S").emit, "no stop here ");
        assert_eq!(matcher.push("T").emit, "");
        assert_eq!(matcher.push("x").emit, "STx");
    }

    #[test]
    fn multi_byte_stop_strings_and_text_are_cut_on_character_boundaries() {
        assert_eq!(
            run(&["日本"], &["こんにちは日", "本語"]),
            ("こんにちは".into(), true)
        );
        assert_eq!(run(&["🙂!"], &["é🙂", "🙂", "!"]), ("é🙂".into(), true));
    }

    #[test]
    fn no_stops_emits_everything_immediately() {
        let mut matcher = StopMatcher::new(StopSet::new(vec![String::new()]));
        assert_eq!(matcher.push("abc").emit, "abc");
        assert_eq!(matcher.finish().emit, "");
    }

    fn expected_output(text: &str, stops: &[String]) -> (String, bool) {
        let first = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min();
        match first {
            Some(at) => (text[..at].to_string(), true),
            None => (text.to_string(), false),
        }
    }

    /// Splits `text` at the given fractions of its characters.
    fn split_at_chars(text: &str, cuts: &[usize]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
        bounds.push(0);
        bounds.push(chars.len());
        bounds.sort_unstable();
        bounds
            .windows(2)
            .map(|w| chars[w[0]..w[1]].iter().collect())
            .collect()
    }

    proptest! {
        #[test]
        fn emitted_text_is_the_text_before_the_first_stop(
            text in "[ab日🙂 ]{0,40}",
            stops in proptest::collection::vec("[ab日🙂 ]{1,4}", 0..4),
            cuts in proptest::collection::vec(0usize..64, 0..12),
        ) {
            let pieces = split_at_chars(&text, &cuts);
            let mut matcher = StopMatcher::new(StopSet::new(stops.clone()));
            let mut out = String::new();
            let mut stopped = false;
            for piece in &pieces {
                let status = matcher.push(piece);
                out.push_str(&status.emit);
                if status.stopped {
                    stopped = true;
                    break;
                }
                // Everything emitted so far is text that precedes any stop.
                prop_assert!(expected_output(&text, &stops).0.starts_with(&out));
            }
            let last = matcher.finish();
            out.push_str(&last.emit);
            stopped |= last.stopped;
            prop_assert_eq!((out, stopped), expected_output(&text, &stops));
        }
    }
}
