//! A parse of the text so far as an ordered list of segments, and the events that turn one
//! snapshot into a later one.

use super::{AssistantTurn, ToolCall, TurnEvent};

/// One run of the turn, in output order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Segment {
    Reasoning(String),
    Content(String),
    Call {
        name: String,
        arguments: String,
        closed: bool,
    },
}

/// Everything certain about the turn from the text so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Snapshot {
    pub segments: Vec<Segment>,
    pub malformed: u32,
}

impl Snapshot {
    pub fn reasoning(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.segments.last_mut() {
            Some(Segment::Reasoning(reasoning)) => reasoning.push_str(text),
            _ => self.segments.push(Segment::Reasoning(text.to_string())),
        }
    }

    pub fn content(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.segments.last_mut() {
            Some(Segment::Content(content)) => content.push_str(text),
            _ => self.segments.push(Segment::Content(text.to_string())),
        }
    }

    pub fn call(&mut self, name: String, arguments: String, closed: bool) {
        self.segments.push(Segment::Call {
            name,
            arguments,
            closed,
        });
    }

    pub fn malformed(&mut self) {
        self.malformed += 1;
    }

    /// Whether `self` only adds to `old`: the same segments, the last of which may have grown
    /// (or, for a call, closed), then new ones. Anything else could not be streamed.
    pub fn extends(&self, old: &Snapshot) -> bool {
        let Some((last, earlier)) = old.segments.split_last() else {
            return self.malformed >= old.malformed;
        };
        self.malformed >= old.malformed
            && self.segments.len() >= old.segments.len()
            && self.segments[..earlier.len()] == *earlier
            && match (last, &self.segments[earlier.len()]) {
                (Segment::Reasoning(a), Segment::Reasoning(b))
                | (Segment::Content(a), Segment::Content(b)) => b.starts_with(a.as_str()),
                (
                    Segment::Call {
                        name: a,
                        arguments: a_args,
                        closed: a_closed,
                    },
                    Segment::Call {
                        name: b,
                        arguments: b_args,
                        closed: b_closed,
                    },
                ) => a == b && b_args.starts_with(a_args.as_str()) && (*b_closed || !*a_closed),
                _ => false,
            }
    }

    /// The events that take a stream from `old` to `self`.
    pub fn events_since(&self, old: &Snapshot) -> Vec<TurnEvent> {
        debug_assert!(
            self.extends(old),
            "a snapshot must extend the previous one\nold: {old:?}\nnew: {self:?}"
        );
        let mut events = Vec::new();
        let mut index = 0;
        for (i, segment) in self.segments.iter().enumerate() {
            let before = old.segments.get(i);
            match segment {
                Segment::Reasoning(text) => {
                    let done = match before {
                        Some(Segment::Reasoning(old)) => old.len(),
                        _ => 0,
                    };
                    if let Some(delta) = text.get(done..).filter(|d| !d.is_empty()) {
                        events.push(TurnEvent::Reasoning(delta.to_string()));
                    }
                }
                Segment::Content(text) => {
                    let done = match before {
                        Some(Segment::Content(old)) => old.len(),
                        _ => 0,
                    };
                    if let Some(delta) = text.get(done..).filter(|d| !d.is_empty()) {
                        events.push(TurnEvent::Content(delta.to_string()));
                    }
                }
                Segment::Call {
                    name,
                    arguments,
                    closed,
                } => {
                    let (started, done, was_closed) = match before {
                        Some(Segment::Call {
                            arguments, closed, ..
                        }) => (true, arguments.len(), *closed),
                        _ => (false, 0, false),
                    };
                    if !started {
                        events.push(TurnEvent::ToolCallStart {
                            index,
                            name: name.clone(),
                        });
                    }
                    if let Some(delta) = arguments.get(done..).filter(|d| !d.is_empty()) {
                        events.push(TurnEvent::ToolCallArguments {
                            index,
                            delta: delta.to_string(),
                        });
                    }
                    if *closed && !was_closed {
                        events.push(TurnEvent::ToolCallEnd { index });
                    }
                    index += 1;
                }
            }
        }
        events
    }

    /// The turn these segments make.
    pub fn turn(&self) -> AssistantTurn {
        let mut turn = AssistantTurn {
            malformed_calls: self.malformed,
            ..AssistantTurn::default()
        };
        for segment in &self.segments {
            match segment {
                Segment::Reasoning(text) => turn.reasoning.push_str(text),
                Segment::Content(text) => turn.content.push_str(text),
                Segment::Call {
                    name, arguments, ..
                } => turn.tool_calls.push(ToolCall {
                    name: name.clone(),
                    arguments: arguments.clone(),
                }),
            }
        }
        turn
    }
}
