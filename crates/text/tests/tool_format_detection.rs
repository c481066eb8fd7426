//! `ToolCallFormat::detect` and `ReasoningSyntax::detect` over every real chat template in
//! `tests/data/chat-templates/`, against the table in `tests/data/tool_format_detection.txt`
//! (written by reading each template).

use sluice_text::assistant::{ReasoningSyntax, ToolCallFormat};
use std::path::Path;

fn format_name(format: ToolCallFormat) -> &'static str {
    match format {
        ToolCallFormat::Hermes => "Hermes",
        ToolCallFormat::QwenXml => "QwenXml",
        ToolCallFormat::Llama3Json => "Llama3Json",
        ToolCallFormat::MistralArgs => "MistralArgs",
        ToolCallFormat::MistralList => "MistralList",
        ToolCallFormat::GenericJson => "GenericJson",
    }
}

#[test]
fn every_real_template_detects_as_the_table_says() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let table = std::fs::read_to_string(data.join("tool_format_detection.txt")).unwrap();
    let expected: Vec<Vec<&str>> = table
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| line.split_whitespace().collect())
        .collect();
    let mut templates: Vec<String> = std::fs::read_dir(data.join("chat-templates"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jinja"))
        .collect();
    templates.sort();
    let listed: Vec<&str> = expected.iter().map(|row| row[0]).collect();
    assert_eq!(
        listed, templates,
        "the table must list every template once, sorted"
    );

    let mut wrong = Vec::new();
    for row in &expected {
        let source = std::fs::read_to_string(data.join("chat-templates").join(row[0])).unwrap();
        let format = format_name(ToolCallFormat::detect(&source));
        let reasoning = if ReasoningSyntax::detect(&source).is_some() {
            "yes"
        } else {
            "no"
        };
        if [format, reasoning] != [row[1], row[2]] {
            wrong.push(format!(
                "{}: detected {format} {reasoning}, table says {} {}",
                row[0], row[1], row[2]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let count = |name: &str| expected.iter().filter(|row| row[1] == name).count();
    // Each format we read is shown by at least one real template.
    for name in [
        "Hermes",
        "QwenXml",
        "Llama3Json",
        "MistralArgs",
        "MistralList",
    ] {
        assert!(count(name) > 0, "no template detects as {name}");
    }
}
