//! Bounds enforced while decoding: integer ranges (`minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`: every value in range is written, none outside, and no prefix leads into a
//! dead end) and string lengths (`minLength`, `maxLength`, in code points).

use serde_json::json;

use super::*;
use crate::constraint::Recognizer;

use super::test_support::{object_with, prefix_and_whole};

#[test]
fn every_integer_in_range_is_accepted_and_no_other_and_no_prefix_is_a_dead_end() {
    for (min, max) in [
        (-5i64, 120i64),
        (0, 9),
        (7, 7),
        (-300, -12),
        (15, 1_000),
        (-1, 1),
    ] {
        let schema = object_with(json!({"type": "integer", "minimum": min, "maximum": max}));
        let in_range: Vec<String> = (min..=max).map(|v| v.to_string()).collect();
        for v in -1_200i64..=1_200 {
            let text = v.to_string();
            let (prefix, whole) = prefix_and_whole(&schema, &text);
            assert_eq!(whole, (min..=max).contains(&v), "{text} in [{min}, {max}]");
            // A prefix is taken exactly when some value in range starts with it.
            let live = in_range.iter().any(|r| r.starts_with(&text));
            assert_eq!(prefix, live, "prefix {text} in [{min}, {max}]");
        }
        // `-` alone is taken only when a negative value is in range.
        assert_eq!(
            prefix_and_whole(&schema, "-").0,
            min < 0,
            "- in [{min}, {max}]"
        );
        // Never a fraction or an exponent.
        assert!(!prefix_and_whole(&schema, &format!("{min}.0")).0);
    }
}

#[test]
fn exclusive_and_fractional_bounds_give_the_integers_inside() {
    let schema =
        object_with(json!({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}));
    let accepted: Vec<i64> = (-20..=20)
        .filter(|v| prefix_and_whole(&schema, &v.to_string()).1)
        .collect();
    assert_eq!(accepted, (1..=9).collect::<Vec<_>>());
    let schema = object_with(json!({"type": "integer", "minimum": 0.5, "maximum": 3.5}));
    let accepted: Vec<i64> = (-20..=20)
        .filter(|v| prefix_and_whole(&schema, &v.to_string()).1)
        .collect();
    assert_eq!(accepted, (1..=3).collect::<Vec<_>>());
}

#[test]
fn bounds_at_the_edges_of_64_bits_neither_overflow_nor_wrap() {
    let schema = object_with(json!({"type": "integer", "minimum": -1, "maximum": i64::MAX}));
    for (text, ok) in [
        ("9223372036854775807", true),
        ("9223372036854775808", false),
        ("99999999999999999999999", false),
    ] {
        assert_eq!(prefix_and_whole(&schema, text).1, ok, "{text}");
    }
    let schema = object_with(json!({"type": "integer", "minimum": i64::MIN, "maximum": 1}));
    for (text, ok) in [
        ("-9223372036854775808", true),
        ("-9223372036854775809", false),
        ("-99999999999999999999999", false),
    ] {
        assert_eq!(prefix_and_whole(&schema, text).1, ok, "{text}");
    }
    let schema = object_with(json!({"type": "integer", "minimum": 1e30}));
    assert!(
        !prefix_and_whole(&schema, "1").0,
        "1e30 is beyond every i64"
    );
}

#[test]
fn an_empty_range_is_an_error_naming_it() {
    let empty = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 4}}});
    let err = Schema::compile(&empty).unwrap_err();
    assert!(
        err.to_string().contains("no integer lies between 5 and 4"),
        "{err}"
    );
    let float = json!({"type": "object", "properties": {"x": {"type": "number", "minimum": 1, "exclusiveMaximum": 1}}});
    let err = Schema::compile(&float).unwrap_err();
    assert!(
        err.to_string().contains("no number lies between") && err.path == "#/properties/x",
        "{err}"
    );
    let huge = json!({"type": "object", "properties": {"n": {"type": "number", "maximum": 1e300}}});
    let err = Schema::compile(&huge).unwrap_err();
    assert!(err.path.ends_with("/maximum"), "{err}");
    // Relaxed (tool arguments): left out and reported instead.
    let (_, ignored) = Schema::compile_relaxed(&huge).unwrap();
    assert_eq!(ignored.len(), 1);
    assert!(ignored[0].ends_with("/maximum"), "{ignored:?}");
}

/// Every number with up to two decimals in -3..3 is written exactly when it is in range, and
/// a prefix is taken exactly when some number in range starts with it.
#[test]
fn numbers_keep_real_bounds_and_no_prefix_is_a_dead_end() {
    let ranges = [
        (json!({"minimum": 0, "maximum": 1}), 0.0, true, 1.0, true),
        (
            json!({"minimum": -1.5, "exclusiveMaximum": 2.25}),
            -1.5,
            true,
            2.25,
            false,
        ),
        (
            json!({"exclusiveMinimum": 0.5, "maximum": 0.75}),
            0.5,
            false,
            0.75,
            true,
        ),
        (
            json!({"exclusiveMinimum": -2.05, "exclusiveMaximum": -0.3}),
            -2.05,
            false,
            -0.3,
            false,
        ),
    ];
    let mut texts: Vec<String> = Vec::new();
    for hundredths in -300i32..=300 {
        let v = f64::from(hundredths) / 100.0;
        texts.push(format!("{v}"));
        texts.push(format!("{v:.2}"));
    }
    for (bounds, lo, lo_incl, hi, hi_incl) in ranges {
        let mut number = bounds.clone();
        number["type"] = json!("number");
        let schema = object_with(number);
        let inside = |v: f64| {
            (if lo_incl { v >= lo } else { v > lo }) && (if hi_incl { v <= hi } else { v < hi })
        };
        let valid: Vec<&String> = (texts.iter())
            .filter(|t| !t.starts_with("-0") || t.parse::<f64>().unwrap() != 0.0)
            .filter(|t| inside(t.parse().unwrap()))
            .collect();
        for text in &texts {
            let v: f64 = text.parse().unwrap();
            let (prefix, whole) = prefix_and_whole(&schema, text);
            let expected = inside(v) && (v != 0.0 || !text.starts_with('-'));
            assert_eq!(whole, expected, "{text} in {bounds}");
            if expected {
                assert!(prefix, "{text} in {bounds}");
            }
            // Prefixes of the texts: live exactly when a valid text (or a longer fraction of
            // one) continues them.
            for end in 1..text.len() {
                let head = &text[..end];
                let live = prefix_and_whole(&schema, head).0;
                if valid.iter().any(|t| t.starts_with(head)) {
                    assert!(live, "{head} (of {text}) in {bounds}");
                }
            }
        }
        // No exponent for a bounded number.
        assert!(!prefix_and_whole(&schema, "1e").0);
    }
}

/// Whether `{"s":<text>}` is a whole document, and whether `{"s":<text>` is a prefix.
fn string_doc(schema: &Schema, text: &str) -> (bool, bool) {
    let prefix = SchemaRecognizer::new(schema).after(schema, format!("{{\"s\":{text}").as_bytes());
    let whole = prefix
        .and_then(|r| r.after(schema, b"}"))
        .is_some_and(|r| r.is_complete());
    (whole, prefix.is_some())
}

#[test]
fn string_lengths_count_code_points_escapes_and_surrogate_pairs_as_one() {
    let schema = Schema::compile(&json!({"type": "object",
        "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 4}}, "required": ["s"]}))
    .unwrap();
    for (text, ok) in [
        (r#""ab""#, true),
        (r#""abcd""#, true),
        ("\"\u{e9}\u{e9}\"", true),
        ("\"\u{1F600}\u{1F600}\u{1F600}\u{1F600}\"", true),
        (r#""\u00e9x""#, true),
        (r#""\ud83d\ude00x""#, true),
        (r#""\n\t\"\\""#, true),
        (r#""a""#, false),
        (r#""""#, false),
        (r#""abcde""#, false),
        ("\"\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\"", false),
        (
            r#""\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00""#,
            false,
        ),
    ] {
        assert_eq!(string_doc(&schema, text).0, ok, "{text}");
    }
    // The fifth character is refused as it starts, the closing quote after one character too.
    assert!(string_doc(&schema, r#""abcd"#).1);
    assert!(!string_doc(&schema, r#""abcde"#).1);
    assert!(!string_doc(&schema, r#""a""#).1);
    assert!(!string_doc(&schema, "\"abcd\u{e9}").1);
}

#[test]
fn bad_string_bounds_are_errors_and_unbounded_strings_share_their_states() {
    let bad = json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 3, "maxLength": 2}}});
    let err = Schema::compile(&bad).unwrap_err();
    assert!(
        err.to_string().contains("minLength 3 exceeds maxLength 2"),
        "{err}"
    );
    // Inside an unbounded string, no characters are counted: every position is one state (and
    // one cached mask), however long the string grows.
    let schema = Schema::compile(&json!({"type": "object",
        "properties": {"a": {"type": "string"}}}))
    .unwrap();
    let short = SchemaRecognizer::new(&schema)
        .after(&schema, br#"{"a":"x"#)
        .unwrap();
    let long = SchemaRecognizer::new(&schema)
        .after(&schema, br#"{"a":"xyzzy"#)
        .unwrap();
    assert_eq!(short, long);
}
