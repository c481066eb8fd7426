//! The stream/one-shot identity and the rules shared by every format.

use super::*;

/// Parses `text` at once and streamed in every two-piece split, char by char and in pseudo-random
/// pieces; every fold of events (and `turn()`) must equal the one-shot turn, which is returned.
pub(super) fn parse_every_way(text: &str, options: &TurnOptions) -> AssistantTurn {
    let whole = parse_turn(text, options);
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(at, _)| at)
        .chain([text.len()])
        .collect();
    let mut splits: Vec<Vec<usize>> = bounds.iter().map(|&cut| vec![cut]).collect();
    splits.push(bounds.clone());
    let mut seed = 0x9E37_79B9_u64 ^ text.len() as u64;
    for _ in 0..16 {
        let mut cuts: Vec<usize> = bounds
            .iter()
            .copied()
            .filter(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33).is_multiple_of(5)
            })
            .collect();
        cuts.dedup();
        splits.push(cuts);
    }
    for cuts in splits {
        let mut stream = TurnStream::new(options.clone());
        let mut folded = AssistantTurn::default();
        let mut from = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            for event in stream.push(&text[from..cut]) {
                folded.apply(&event);
            }
            from = cut;
        }
        for event in stream.finish() {
            folded.apply(&event);
        }
        folded.malformed_calls = stream.turn().malformed_calls;
        assert_eq!(folded, whole, "split at {cuts:?} of {text:?}");
        assert_eq!(stream.turn(), &whole, "turn() after split at {cuts:?}");
    }
    whole
}

pub(super) fn options(format: Option<ToolCallFormat>, think: bool) -> TurnOptions {
    TurnOptions {
        tool_format: format,
        reasoning: think.then(ReasoningSyntax::think_tags),
        ..TurnOptions::default()
    }
}

pub(super) fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

pub(super) fn turn(
    reasoning: &str,
    content: &str,
    calls: Vec<ToolCall>,
    malformed: u32,
) -> AssistantTurn {
    AssistantTurn {
        reasoning: reasoning.to_string(),
        content: content.to_string(),
        tool_calls: calls,
        malformed_calls: malformed,
    }
}

#[test]
fn without_tools_or_reasoning_all_text_is_content() {
    let text = "<think>x</think> <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    assert_eq!(
        parse_every_way(text, &options(None, false)),
        turn("", text, vec![], 0)
    );
}

#[test]
fn reasoning_is_split_and_trimmed() {
    let text = "<think>\nThe user wants a greeting.\n</think>\n\nHello!";
    let expected = turn("The user wants a greeting.", "Hello!", vec![], 0);
    assert_eq!(parse_every_way(text, &options(None, true)), expected);
}

#[test]
fn prompt_that_opened_reasoning_makes_output_reasoning_until_the_close() {
    let mut opts = options(Some(ToolCallFormat::Hermes), true);
    opts.starts_in_reasoning = true;
    let text = "Let me think.\n</think>\n\nThe answer is 4.";
    assert_eq!(
        parse_every_way(text, &opts),
        turn("Let me think.", "The answer is 4.", vec![], 0)
    );
}

#[test]
fn unclosed_reasoning_stays_reasoning() {
    let text = "<think>\nStill thinking about <tool_call> and </thi";
    let expected = turn("Still thinking about <tool_call> and </thi", "", vec![], 0);
    assert_eq!(
        parse_every_way(text, &options(Some(ToolCallFormat::Hermes), true)),
        expected
    );
}

#[test]
fn think_tag_later_in_the_text_is_content() {
    let text = "Answer first <think>not reasoning</think>";
    assert_eq!(
        parse_every_way(text, &options(None, true)),
        turn("", text, vec![], 0)
    );
}

#[test]
fn partial_open_tag_at_the_end_is_released_as_content() {
    for text in ["<thi", "  <", "<think"] {
        let expected = turn("", text, vec![], 0);
        assert_eq!(
            parse_every_way(text, &options(None, true)),
            expected,
            "{text:?}"
        );
    }
}

#[test]
fn detect_reads_think_and_mistral_think_syntax() {
    assert_eq!(
        ReasoningSyntax::detect("{{ '<think>' }}{{ c.split('</think>')[-1] }}"),
        Some(ReasoningSyntax::think_tags())
    );
    let mistral = ReasoningSyntax::detect("[THINK]{{ t }}[/THINK]").unwrap();
    assert_eq!(
        (mistral.open.as_str(), mistral.close.as_str()),
        ("[THINK]", "[/THINK]")
    );
    assert_eq!(ReasoningSyntax::detect("{{ messages }}"), None);
}

#[test]
fn prompt_opens_reasoning_looks_at_the_last_markers() {
    let think = ReasoningSyntax::think_tags();
    assert!(prompt_opens_reasoning("<|Assistant|><think>\n", &think));
    assert!(!prompt_opens_reasoning(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n",
        &think
    ));
    assert!(!prompt_opens_reasoning("<|im_start|>assistant\n", &think));
    assert!(prompt_opens_reasoning("a</think>b<think>", &think));
}

#[test]
fn from_name_knows_the_parser_names_and_lists_them_on_error() {
    for name in ["hermes", "qwen3_coder", "llama3_json", "mistral", "generic"] {
        assert_eq!(ToolCallFormat::from_name(name).unwrap().name(), name);
    }
    let err = ToolCallFormat::from_name("pythonic").unwrap_err();
    assert!(
        err.contains("pythonic") && err.contains("qwen3_coder"),
        "{err}"
    );
    let nemo = "{{ '[TOOL_CALLS][' }}";
    assert_eq!(
        ToolCallFormat::from_name_and_template("mistral", Some(nemo)),
        Ok(ToolCallFormat::MistralList)
    );
}

#[test]
fn events_name_a_call_before_its_arguments_and_end_it_once() {
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    let mut stream = TurnStream::new(options(Some(ToolCallFormat::Hermes), false));
    let mut events = Vec::new();
    for c in text.chars() {
        events.extend(stream.push(&c.to_string()));
    }
    events.extend(stream.finish());
    assert_eq!(
        events.first(),
        Some(&TurnEvent::ToolCallStart {
            index: 0,
            name: "f".to_string()
        })
    );
    let ends: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::ToolCallEnd { .. }))
        .collect();
    assert_eq!(ends, vec![&TurnEvent::ToolCallEnd { index: 0 }]);
    assert!(stream.push("more").is_empty());
}

/// Garbled text never panics, in any format, and streams as it parses.
#[test]
fn garbled_text_never_panics_and_streams_like_one_shot() {
    let pieces = [
        "<tool_call>",
        "</tool_call>",
        "{",
        "}",
        "[",
        "]",
        "\"name\"",
        "\"arguments\"",
        ":",
        ",",
        "\"f\"",
        "<function=f>",
        "<parameter=a>",
        "</parameter>",
        "</function>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<|python_tag|>",
        ";",
        "<think>",
        "</think>",
        "\"tool_calls\"",
        "\"response\"",
        "\\u00e9",
        "\\",
        "\"",
        " ",
        "\n",
        "x",
        "é",
        "1",
        "-",
        "tru",
        "<",
        "\\ud83d",
    ];
    let formats = [
        ToolCallFormat::Hermes,
        ToolCallFormat::QwenXml,
        ToolCallFormat::Llama3Json,
        ToolCallFormat::MistralArgs,
        ToolCallFormat::GenericJson,
    ];
    let mut seed = 12345u64;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    for round in 0..300 {
        let len = 1 + next(14);
        let text: String = (0..len).map(|_| pieces[next(pieces.len())]).collect();
        let opts = options(Some(formats[round % formats.len()]), round % 3 == 0);
        parse_every_way(&text, &opts);
    }
}

#[test]
fn a_forced_call_in_each_formats_framing_reads_back_as_that_call() {
    let mode = crate::constraint::ToolCallMode::Forced { tool: None };
    for format in ToolCallFormat::ALL {
        let constrained =
            (format.syntax().constrained_call(&mode)).expect("forced calls are constrained");
        let framing = &constrained.framing;
        let text = format!(
            "{}{{\"{}\": \"f\", \"{}\": {{\"q\": 1}}}}{}",
            String::from_utf8_lossy(&framing.prefix),
            framing.name_key,
            framing.args_key,
            String::from_utf8_lossy(&framing.suffix),
        );
        let turn = parse_every_way(&text, &options(Some(constrained.parse_as), false));
        assert_eq!(
            turn.tool_calls,
            vec![call("f", "{\"q\": 1}")],
            "{format:?}: {text}"
        );
        assert_eq!(turn.content, "", "{format:?}");
    }
}

use proptest::strategy::Strategy as _;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any text (markers spliced among arbitrary characters), any format: no panic, and every
    /// split streams to the one-shot turn.
    #[test]
    fn arbitrary_text_streams_like_one_shot(
        parts in proptest::collection::vec(
            proptest::prop_oneof![
                "\\PC{0,6}",
                proptest::sample::select(vec![
                    "<tool_call>", "</tool_call>", "{\"name\": \"f\", \"arguments\": ", "[TOOL_CALLS]",
                    "[ARGS]", "<function=f>", "<parameter=p>", "</parameter>", "</function>",
                    "<think>", "</think>", "<|python_tag|>", "{\"tool_calls\": [", "{\"response\": \"",
                ]).prop_map(String::from),
            ],
            0..8,
        ),
        format in 0..ToolCallFormat::ALL.len(),
        think in proptest::bool::ANY,
    ) {
        parse_every_way(&parts.concat(), &options(Some(ToolCallFormat::ALL[format]), think));
    }
}
