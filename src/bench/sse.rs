//! Server-sent events as OpenAI-compatible servers stream them, decoded incrementally.
//!
//! Network reads split events anywhere (inside a line, inside a UTF-8 character), so the decoder
//! buffers bytes until a full line is in hand and dispatches an event at each blank line.

use serde_json::Value;

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event type.
    pub event: Option<String>,
    /// The `data:` lines of the event joined with `\n`.
    pub data: String,
}

/// Incremental decoder from raw response bytes to [`SseEvent`]s.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line not yet terminated by `\n`.
    partial_line: Vec<u8>,
    data_lines: Vec<String>,
    event: Option<String>,
}

impl SseDecoder {
    /// Feeds the next bytes read from the stream; returns the events they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            if byte == b'\n' {
                let mut line = std::mem::take(&mut self.partial_line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if let Some(event) = self.take_line(&String::from_utf8_lossy(&line)) {
                    events.push(event);
                }
            } else {
                self.partial_line.push(byte);
            }
        }
        events
    }

    /// Flushes an event the stream ended without terminating by a blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.partial_line.is_empty() {
            let line = std::mem::take(&mut self.partial_line);
            // An unterminated last line cannot dispatch by itself; a blank line after it does.
            let _ = self.take_line(&String::from_utf8_lossy(&line));
        }
        self.take_line("")
    }

    fn take_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            if self.data_lines.is_empty() {
                self.event = None;
                return None;
            }
            return Some(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data_lines).join("\n"),
            });
        }
        if line.starts_with(':') {
            return None; // a comment, used by servers as keep-alive
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => self.data_lines.push(value.to_owned()),
            "event" => self.event = Some(value.to_owned()),
            _ => {} // `id:` and `retry:` do not matter to a load generator
        }
        None
    }
}

/// Token counts a server reports in a chunk's `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageCounts {
    /// Tokens in the prompt as the server counted them.
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: Option<u64>,
}

/// What one event of a streamed completion says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamMessage {
    /// `data: [DONE]`: the stream is complete.
    Done,
    /// A completion chunk: generated text (possibly empty) and usage when the server attached it.
    Chunk {
        /// Text of every choice in this chunk, concatenated.
        text: String,
        /// Usage, usually only on the last chunk (`stream_options.include_usage`).
        usage: Option<UsageCounts>,
    },
    /// The server reported an error inside the stream.
    Error(String),
}

/// An event whose data is neither `[DONE]` nor JSON.
#[derive(Debug, thiserror::Error)]
#[error("stream event is not JSON: {data:?}")]
pub struct MalformedEvent {
    /// The data the server sent.
    pub data: String,
}

/// Interprets one event of a `/v1/completions` (or chat) stream.
pub fn parse_stream_message(event: &SseEvent) -> Result<StreamMessage, MalformedEvent> {
    let data = event.data.trim();
    if data == "[DONE]" {
        return Ok(StreamMessage::Done);
    }
    let value: Value = match serde_json::from_str(data) {
        Ok(value) => value,
        Err(_) if event.event.as_deref() == Some("error") => {
            return Ok(StreamMessage::Error(data.to_owned()))
        }
        Err(_) => {
            return Err(MalformedEvent {
                data: data.to_owned(),
            })
        }
    };
    if let Some(error) = value.get("error") {
        return Ok(StreamMessage::Error(error_message(error)));
    }
    if event.event.as_deref() == Some("error") {
        return Ok(StreamMessage::Error(error_message(&value)));
    }
    let text = value
        .get("choices")
        .and_then(Value::as_array)
        .map(|choices| choices.iter().filter_map(choice_text).collect::<String>())
        .unwrap_or_default();
    let usage = value
        .get("usage")
        .filter(|usage| usage.is_object())
        .map(|usage| UsageCounts {
            prompt_tokens: usage.get("prompt_tokens").and_then(Value::as_u64),
            completion_tokens: usage.get("completion_tokens").and_then(Value::as_u64),
        });
    Ok(StreamMessage::Chunk { text, usage })
}

/// `choices[i].text` for completions, `choices[i].delta.content` for chat completions.
fn choice_text(choice: &Value) -> Option<&str> {
    choice
        .get("text")
        .and_then(Value::as_str)
        .or_else(|| choice.get("delta")?.get("content")?.as_str())
}

fn error_message(error: &Value) -> String {
    match error {
        Value::String(message) => message.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn events_split_across_reads_are_reassembled() {
        let stream = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
        for split in 0..stream.len() {
            let mut decoder = SseDecoder::default();
            let mut events = decoder.push(&stream[..split]);
            events.extend(decoder.push(&stream[split..]));
            assert_eq!(
                data(&events),
                ["{\"a\":1}", "{\"b\":2}", "[DONE]"],
                "split at {split}"
            );
        }
    }

    #[test]
    fn byte_at_a_time_reads_keep_multibyte_characters_whole() {
        let stream = "data: {\"text\":\"héllo ✓\"}\r\n\r\n".as_bytes();
        let mut decoder = SseDecoder::default();
        let events: Vec<SseEvent> = stream.iter().flat_map(|b| decoder.push(&[*b])).collect();
        assert_eq!(data(&events), ["{\"text\":\"héllo ✓\"}"]);
    }

    #[test]
    fn comments_and_unknown_fields_do_not_dispatch() {
        let mut decoder = SseDecoder::default();
        let events = decoder.push(b": keep-alive\n\nid: 3\nretry: 10\n\ndata:x\n\n");
        assert_eq!(data(&events), ["x"]);
    }

    #[test]
    fn multi_line_data_joins_with_newlines_and_keeps_event_name() {
        let mut decoder = SseDecoder::default();
        let events = decoder.push(b"event: error\ndata: first\ndata: second\n\n");
        assert_eq!(
            events,
            [SseEvent {
                event: Some("error".into()),
                data: "first\nsecond".into()
            }]
        );
    }

    #[test]
    fn unterminated_final_event_is_flushed_by_finish() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: [DONE]").is_empty());
        assert_eq!(decoder.finish().map(|e| e.data), Some("[DONE]".into()));
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn done_marker_ends_the_stream() {
        let event = SseEvent {
            event: None,
            data: "[DONE]".into(),
        };
        assert_eq!(parse_stream_message(&event).unwrap(), StreamMessage::Done);
    }

    #[test]
    fn completion_chunk_yields_text_and_usage() {
        let event = SseEvent {
            event: None,
            data: r#"{"choices":[{"index":0,"text":" hi"}],"usage":null}"#.into(),
        };
        assert_eq!(
            parse_stream_message(&event).unwrap(),
            StreamMessage::Chunk {
                text: " hi".into(),
                usage: None
            }
        );
        let last = SseEvent {
            event: None,
            data: r#"{"choices":[],"usage":{"prompt_tokens":128,"completion_tokens":64}}"#.into(),
        };
        assert_eq!(
            parse_stream_message(&last).unwrap(),
            StreamMessage::Chunk {
                text: String::new(),
                usage: Some(UsageCounts {
                    prompt_tokens: Some(128),
                    completion_tokens: Some(64)
                })
            }
        );
    }

    #[test]
    fn chat_delta_content_counts_as_text() {
        let event = SseEvent {
            event: None,
            data: r#"{"choices":[{"delta":{"content":"ok"}}]}"#.into(),
        };
        assert!(matches!(
            parse_stream_message(&event).unwrap(),
            StreamMessage::Chunk { text, .. } if text == "ok"
        ));
    }

    #[test]
    fn error_events_carry_the_server_message() {
        let object = SseEvent {
            event: None,
            data: r#"{"error":{"message":"out of blocks","type":"server_error"}}"#.into(),
        };
        assert_eq!(
            parse_stream_message(&object).unwrap(),
            StreamMessage::Error("out of blocks".into())
        );
        let named = SseEvent {
            event: Some("error".into()),
            data: "engine stopped".into(),
        };
        assert_eq!(
            parse_stream_message(&named).unwrap(),
            StreamMessage::Error("engine stopped".into())
        );
    }

    #[test]
    fn non_json_data_is_malformed() {
        let event = SseEvent {
            event: None,
            data: "not json".into(),
        };
        assert!(parse_stream_message(&event).is_err());
    }
}
