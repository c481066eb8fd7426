//! The recent batches of every topic, for subscribers that missed some (vLLM's replay socket:
//! a ROUTER that answers "from sequence N" with the buffered batches, then an end marker).
//!
//! A request is the frames `[identity, "", start_seq]` as vLLM's subscriber sends them
//! (`start_seq` 8 bytes, big-endian), optionally followed by a topic frame that picks the model
//! (without it: the first model that published). The answer is one message
//! `[identity, "", seq, payload]` per buffered batch of that topic with `seq >= start_seq`, then
//! `[identity, "", -1, ""]`. A malformed request gets the end marker alone, so no client waits.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

/// The end-of-replay sequence number, `-1` as a signed 64-bit big-endian integer.
pub const END_SEQ: [u8; 8] = (-1i64).to_be_bytes();

/// Buffered batches, per topic, bounded in count and bytes.
#[derive(Debug)]
pub struct ReplayBuffer {
    max_batches: usize,
    max_bytes: usize,
    topics: HashMap<Bytes, Topic>,
    /// The topic a request without a topic frame replays.
    first: Option<Bytes>,
}

#[derive(Debug, Default)]
struct Topic {
    batches: VecDeque<(u64, Bytes)>,
    bytes: usize,
}

/// A parsed replay request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// Who asked (the ROUTER's identity frame).
    pub identity: Bytes,
    /// The first sequence number wanted; `None` for a malformed request.
    pub start: Option<u64>,
    /// The topic asked for, if named.
    pub topic: Option<Bytes>,
}

impl Request {
    /// Reads the frames a ROUTER received (identity first).
    pub fn parse(frames: Vec<Bytes>) -> Option<Request> {
        let mut frames = frames.into_iter();
        let identity = frames.next()?;
        let rest: Vec<Bytes> = frames.collect();
        let start = match rest.as_slice() {
            [empty, seq] | [empty, seq, _] if empty.is_empty() && seq.len() == 8 => {
                Some(u64::from_be_bytes(seq[..].try_into().expect("8 bytes")))
            }
            _ => None,
        };
        let topic = (rest.len() == 3).then(|| rest[2].clone());
        Some(Request {
            identity,
            start,
            topic,
        })
    }
}

impl ReplayBuffer {
    /// Keeps at most `max_batches` batches and `max_bytes` bytes of payload per topic.
    pub fn new(max_batches: usize, max_bytes: usize) -> Self {
        ReplayBuffer {
            max_batches,
            max_bytes,
            topics: HashMap::new(),
            first: None,
        }
    }

    /// Remembers batch `seq` of `topic`, forgetting the oldest ones beyond the bounds.
    pub fn push(&mut self, topic: &Bytes, seq: u64, payload: Bytes) {
        if self.max_batches == 0 {
            return;
        }
        if self.first.is_none() {
            self.first = Some(topic.clone());
        }
        let t = self.topics.entry(topic.clone()).or_default();
        t.bytes += payload.len();
        t.batches.push_back((seq, payload));
        while t.batches.len() > self.max_batches
            || (t.bytes > self.max_bytes && t.batches.len() > 1)
        {
            let (_, old) = t.batches.pop_front().expect("not empty");
            t.bytes -= old.len();
        }
    }

    /// The answer to `request`: the messages to send, end marker included.
    pub fn answer(&self, request: &Request) -> Vec<Vec<Bytes>> {
        let envelope =
            |seq: Bytes, payload: Bytes| vec![request.identity.clone(), Bytes::new(), seq, payload];
        let mut out = Vec::new();
        let topic = request.topic.as_ref().or(self.first.as_ref());
        if let (Some(start), Some(t)) = (request.start, topic.and_then(|t| self.topics.get(t))) {
            for (seq, payload) in t.batches.iter().filter(|(seq, _)| *seq >= start) {
                let seq = Bytes::copy_from_slice(&seq.to_be_bytes());
                out.push(envelope(seq, payload.clone()));
            }
        }
        out.push(envelope(Bytes::from_static(&END_SEQ), Bytes::new()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(frames: &[&[u8]]) -> Request {
        Request::parse(frames.iter().map(|f| Bytes::copy_from_slice(f)).collect()).unwrap()
    }

    fn seqs(answer: &[Vec<Bytes>]) -> Vec<i64> {
        (answer.iter())
            .map(|m| i64::from_be_bytes(m[2][..].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn replays_from_the_asked_sequence_then_ends() {
        let mut buffer = ReplayBuffer::new(100, 1 << 20);
        let a = Bytes::from_static(b"kv@pod@a");
        for seq in 0..5 {
            buffer.push(&a, seq, Bytes::from(vec![seq as u8; 3]));
        }
        let answer = buffer.answer(&request(&[b"id", b"", &2u64.to_be_bytes()]));
        assert_eq!(seqs(&answer), [2, 3, 4, -1]);
        assert_eq!(answer[0][0], Bytes::from_static(b"id"));
        assert!(answer[0][1].is_empty());
        assert_eq!(answer[0][3], Bytes::from(vec![2u8; 3]));
        assert!(answer[3][3].is_empty());
    }

    #[test]
    fn a_topic_frame_picks_the_model_and_the_first_model_is_the_default() {
        let mut buffer = ReplayBuffer::new(100, 1 << 20);
        let (a, b) = (Bytes::from_static(b"kv@p@a"), Bytes::from_static(b"kv@p@b"));
        buffer.push(&a, 0, Bytes::from_static(b"a0"));
        buffer.push(&b, 0, Bytes::from_static(b"b0"));
        buffer.push(&b, 1, Bytes::from_static(b"b1"));
        let zero = 0u64.to_be_bytes();
        assert_eq!(seqs(&buffer.answer(&request(&[b"i", b"", &zero]))), [0, -1]);
        let named = buffer.answer(&request(&[b"i", b"", &zero, b"kv@p@b"]));
        assert_eq!(seqs(&named), [0, 1, -1]);
        assert_eq!(named[1][3], Bytes::from_static(b"b1"));
        let unknown = buffer.answer(&request(&[b"i", b"", &zero, b"kv@p@z"]));
        assert_eq!(seqs(&unknown), [-1]);
    }

    #[test]
    fn bounded_in_batches_and_bytes() {
        let mut buffer = ReplayBuffer::new(3, 1 << 20);
        let a = Bytes::from_static(b"t");
        for seq in 0..10 {
            buffer.push(&a, seq, Bytes::from_static(b"x"));
        }
        let zero = 0u64.to_be_bytes();
        assert_eq!(
            seqs(&buffer.answer(&request(&[b"i", b"", &zero]))),
            [7, 8, 9, -1]
        );
        let mut small = ReplayBuffer::new(100, 10);
        for seq in 0..10 {
            small.push(&a, seq, Bytes::from(vec![0u8; 4]));
        }
        assert_eq!(
            seqs(&small.answer(&request(&[b"i", b"", &zero]))),
            [8, 9, -1]
        );
    }

    #[test]
    fn malformed_requests_get_the_end_marker_alone() {
        let mut buffer = ReplayBuffer::new(100, 1 << 20);
        buffer.push(&Bytes::from_static(b"t"), 0, Bytes::from_static(b"x"));
        for frames in [
            vec![&b"i"[..], b"", b"short"],
            vec![b"i", b"not empty", &[0u8; 8]],
            vec![b"i"],
            vec![b"i", b"", &[0u8; 8], b"t", b"extra"],
        ] {
            let answer = buffer.answer(&request(&frames));
            assert_eq!(seqs(&answer), [-1], "{frames:?}");
        }
        assert_eq!(Request::parse(Vec::new()), None);
    }
}
