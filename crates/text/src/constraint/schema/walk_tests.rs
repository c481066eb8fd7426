//! Random byte walks through schemas with every value keyword: from any prefix the recognizer
//! takes, some byte (or the end) is always allowed, and every walk ends in a whole document
//! that the schema's rules accept. A dead end is what makes the sampler find no token.

use serde_json::{json, Value};

use super::*;
use crate::constraint::Recognizer;

fn schemas() -> Vec<Value> {
    let object = |n: Value| json!({"type": "object", "properties": {"n": n}, "required": ["n"]});
    vec![
        object(json!({"type": "string", "format": "date"})),
        object(json!({"type": "string", "format": "date-time"})),
        object(json!({"type": "string", "format": "uuid"})),
        object(json!({"type": "string", "format": "email"})),
        object(json!({"type": "string", "format": "ipv4"})),
        object(json!({"type": "string", "pattern": "^(ab|cd)+$"})),
        object(json!({"type": "string", "pattern": "^[0-9]{1,3}(\\.[0-9])?$"})),
        object(json!({"type": "string", "minLength": 2, "maxLength": 3})),
        object(json!({"type": "number", "exclusiveMinimum": -167.04, "exclusiveMaximum": 20.96})),
        object(json!({"type": "number", "minimum": 390.749, "maximum": 633.149})),
        object(json!({"type": "integer", "exclusiveMaximum": -41})),
        object(
            json!({"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": 2, "maxItems": 3}),
        ),
        object(json!({"anyOf": [{"type": "number", "maximum": -0.5}, {"type": "null"}]})),
        // A pattern and a length limit together: a text the pattern could go on with but the
        // limit cuts short is a dead end unless the characters left are counted.
        object(json!({"type": "string", "format": "email", "maxLength": 12})),
        object(json!({"type": "string", "pattern": "^(a|bbbbb)(c|dddd)$", "maxLength": 5})),
        object(
            json!({"type": "string", "pattern": "^x-[0-9a-f]{4}$", "minLength": 2, "maxLength": 6}),
        ),
        object(json!({"type": "string", "pattern": "^(ab|\\n\\n\\n)+$", "maxLength": 4})),
        // ... and a pattern that must end before minLength on one branch.
        object(json!({"type": "string", "pattern": "^(a|bbbb)c?$", "minLength": 3})),
        object(
            json!({"type": "string", "pattern": "^[0-9]{1,2}(-[0-9]{3})?$", "minLength": 4, "maxLength": 6}),
        ),
    ]
}

#[test]
fn random_walks_never_reach_a_dead_end() {
    let mut seed = 12345u64;
    for value in schemas() {
        let schema = Schema::compile(&value).unwrap();
        for walk in 0..100 {
            let mut r = SchemaRecognizer::new(&schema);
            let mut text = Vec::new();
            while !r.is_complete() && text.len() < 400 {
                let options: Vec<u8> = (0..=255u8)
                    .filter(|&b| r.after(&schema, &[b]).is_some())
                    .collect();
                if options.is_empty() {
                    let end = r.after_byteless(&schema);
                    assert!(
                        end.is_some(),
                        "{value}: walk {walk} stuck after {:?}",
                        String::from_utf8_lossy(&text)
                    );
                    break;
                }
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let byte = options[(seed >> 33) as usize % options.len()];
                text.push(byte);
                r = r.after(&schema, &[byte]).unwrap();
            }
        }
    }
}
