//! `pattern` on strings, enforced while decoding: the string's characters (escapes decoded)
//! match the regular expression somewhere, as JSON Schema's ECMA-262 `test` does, so
//! `^...$` anchors it to the whole string.

use serde_json::json;

use super::*;

use super::test_support::{object_with, prefix_and_whole};

#[test]
fn an_anchored_pattern_holds_the_whole_string() {
    let schema = object_with(json!({"type": "string", "pattern": "^[a-z]{3}-\\d+$"}));
    assert_eq!(prefix_and_whole(&schema, r#""abc-12""#), (true, true));
    assert_eq!(
        prefix_and_whole(&schema, r#""abc-"#),
        (true, false),
        "no digit yet"
    );
    assert_eq!(
        prefix_and_whole(&schema, r#""abc-""#),
        (false, false),
        "closed too soon"
    );
    assert_eq!(
        prefix_and_whole(&schema, r#""ab1"#),
        (false, false),
        "a dead end at once"
    );
    assert_eq!(prefix_and_whole(&schema, r#""abc-1x"#), (false, false));
}

#[test]
fn an_unanchored_pattern_matches_anywhere() {
    let schema = object_with(json!({"type": "string", "pattern": "[0-9]"}));
    assert_eq!(prefix_and_whole(&schema, r#""room 7 left""#), (true, true));
    assert_eq!(prefix_and_whole(&schema, r#""no digits"#), (true, false));
    assert_eq!(prefix_and_whole(&schema, r#""no digits""#), (false, false));
}

#[test]
fn escapes_are_matched_as_the_characters_they_stand_for() {
    let schema = object_with(json!({"type": "string", "pattern": "^a\"b\\\\c\\nd$"}));
    assert_eq!(prefix_and_whole(&schema, r#""a\"b\\c\nd""#), (true, true));
    assert_eq!(
        prefix_and_whole(&schema, r#""a\u0022"#),
        (false, false),
        "no \\u in a pattern"
    );
}

#[test]
fn a_pattern_and_length_bounds_hold_together() {
    let schema =
        object_with(json!({"type": "string", "pattern": "^x+$", "maxLength": 3, "minLength": 2}));
    assert_eq!(prefix_and_whole(&schema, r#""xx""#), (true, true));
    assert_eq!(prefix_and_whole(&schema, r#""x"#), (true, false));
    assert_eq!(prefix_and_whole(&schema, r#""x""#), (false, false));
    assert_eq!(prefix_and_whole(&schema, r#""xxxx"#), (false, false));
}

#[test]
fn a_bad_pattern_is_refused_with_its_path_and_position() {
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "a(b"}}});
    let err = Schema::compile(&schema).unwrap_err();
    assert_eq!(err.path, "#/properties/n/pattern");
    assert!(err.message.contains("at byte 1"), "{err}");
}

#[test]
fn enforced_formats_hold_the_whole_string_and_others_stay_annotations() {
    let schema = object_with(json!({"type": "string", "format": "date"}));
    assert_eq!(prefix_and_whole(&schema, r#""2026-11-27""#), (true, true));
    assert_eq!(prefix_and_whole(&schema, r#""2026-11-2""#), (false, false));
    assert_eq!(
        prefix_and_whole(&schema, r#""2026-13"#),
        (false, false),
        "month 13"
    );
    assert_eq!(prefix_and_whole(&schema, r#""tomorrow"#), (false, false));
    let uuid = object_with(json!({"type": "string", "format": "uuid"}));
    let id = r#""123e4567-e89b-12d3-a456-426614174000""#;
    assert_eq!(prefix_and_whole(&uuid, id), (true, true));
    let uri = object_with(json!({"type": "string", "format": "uri"}));
    assert_eq!(prefix_and_whole(&uri, r#""anything at all""#), (true, true));
}

#[test]
fn a_pattern_beside_an_enforced_format_is_refused_strictly_and_wins_relaxed() {
    let both = json!({"type": "object", "properties": {
        "n": {"type": "string", "format": "date", "pattern": "^x$"}}, "required": ["n"]});
    let error = Schema::compile(&both).unwrap_err().to_string();
    assert!(error.contains("#/properties/n/format"), "{error}");
    let (schema, ignored) = Schema::compile_relaxed(&both).unwrap();
    assert_eq!(ignored, vec!["#/properties/n/format".to_string()]);
    assert_eq!(prefix_and_whole(&schema, r#""x""#), (true, true));
}

/// A pattern and `maxLength` that no string satisfies together are refused up front (strict),
/// or the pattern is left out (relaxed), rather than a string no token can start.
#[test]
fn a_pattern_longer_than_max_length_is_an_error() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "string", "format": "uuid", "maxLength": 20}}});
    let err = Schema::compile(&schema).unwrap_err();
    assert!(
        err.to_string()
            .contains("at least 36 characters, more than maxLength 20"),
        "{err}"
    );
    let (_, ignored) = Schema::compile_relaxed(&schema).unwrap();
    assert_eq!(ignored, ["#/properties/n/format"]);
    let short = json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "^[a-z]{2,4}$", "minLength": 5}}});
    let err = Schema::compile(&short).unwrap_err();
    assert!(
        err.to_string()
            .contains("at most 4 characters, fewer than minLength 5"),
        "{err}"
    );
    let fits = json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "^a{3}$", "maxLength": 3}}});
    assert!(Schema::compile(&fits).is_ok());
}
