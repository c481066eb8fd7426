//! `response_format: {"type": "json_schema"}`: a JSON Schema compiled into rules a byte-level
//! recognizer follows, so every token keeps the output a valid prefix of a conforming document.
//!
//! The subset is what structured-output clients send (the OpenAI SDK from pydantic models):
//! `type` (one or a list), `properties` / `required` / `additionalProperties: false`, `items` /
//! `minItems` / `maxItems`, `minLength` / `maxLength`, `pattern` (a regex matched anywhere
//! in the string, escapes decoded; see `regex.rs`), `enum`, `const`, `anyOf` / `oneOf`, a single-element `allOf`, and
//! `$ref` into `$defs` / `definitions` (recursion allowed). As in strict structured outputs,
//! an object with `properties` takes no other keys. Annotations (`title`, `description`,
//! `default`, `examples`, `format`, ...) are ignored; any other keyword is refused with its
//! path, never silently dropped. Alternatives of a union must begin with different JSON types
//! (a string or null, an object or an array, ...), so the first byte of a value decides which
//! one it is, except objects that share a key whose value is a distinct `const` (or one-value
//! `enum`) in each: that discriminator must then come first in the object, and its value
//! picks the alternative.
//!
//! [`Schema::compile_relaxed`] takes the schemas agents send as tool parameters: what the
//! subset cannot enforce is left out and reported by path (see `relax.rs`).

mod compiler;
mod formats;
mod recognizer;
mod relax;
mod rules;
mod tool_union;
mod vocabulary;

pub use recognizer::SchemaRecognizer;
pub use rules::{Schema, SchemaError, MAX_PROPERTIES, MAX_SCHEMA_DEPTH};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod pattern_tests;
#[cfg(test)]
mod relax_tests;

#[cfg(test)]
mod tagged_tests;

#[cfg(test)]
mod walk_tests;
