//! The bounds a schema puts on scalar values: a number's range (`minimum`, `maximum` and their
//! exclusive forms; an integer's as an `IntRange`, another number's as the expression of
//! `decimal_range.rs`) and a string's length (`minLength`, `maxLength`), read into the nodes the
//! recognizer checks them with.

use std::sync::Arc;

use serde_json::Value;

use super::super::super::regex::Regex;
use super::super::rules::*;
use super::{decimal_range, Compiler};

/// The keywords bounding a number's value.
pub(super) const RANGE_KEYWORDS: [&str; 4] =
    ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/// A real bound: the value and whether it is in the range.
pub(super) type RealBound = Option<(f64, bool)>;

/// The tightest lower and upper bounds `minimum`, `maximum` and their exclusive forms give a
/// non-integer number (at equal values the exclusive one).
pub(super) fn real_range(
    map: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<(RealBound, RealBound), SchemaError> {
    let mut lower: RealBound = None;
    let mut upper: RealBound = None;
    for (key, is_lower, inclusive) in [
        ("minimum", true, true),
        ("exclusiveMinimum", true, false),
        ("maximum", false, true),
        ("exclusiveMaximum", false, false),
    ] {
        let Some(v) = map.get(key) else { continue };
        let f = (v.as_f64().filter(|f| f.is_finite()))
            .ok_or_else(|| SchemaError::at(path, format!("{key} must be a number")))?;
        if f.abs() >= 10f64.powi(decimal_range::MAX_BOUND_DIGITS as i32) {
            return Err(SchemaError::at(
                &format!("{path}/{key}"),
                format!("{key} {f} is too large to enforce on a number"),
            ));
        }
        let slot = if is_lower { &mut lower } else { &mut upper };
        let tighter = match *slot {
            None => true,
            Some((g, _)) if f == g => !inclusive,
            Some((g, _)) => (f > g) == is_lower,
        };
        if tighter {
            *slot = Some((f, inclusive));
        }
    }
    Ok((lower, upper))
}

/// The inclusive integer bounds `minimum`, `maximum` and their exclusive forms give (any JSON
/// number as a bound; an empty range is an error).
pub(super) fn int_range(
    map: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<IntRange, SchemaError> {
    let bound = |key: &str| -> Result<Option<f64>, SchemaError> {
        match map.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite())
                .map(Some)
                .ok_or_else(|| SchemaError::at(path, format!("{key} must be a number"))),
        }
    };
    // The integers `x >= f` start at ceil(f); `x > f` at floor(f) + 1 (and mirrored above).
    let clamp = |f: f64| f.clamp(i64::MIN as f64, i64::MAX as f64) as i64;
    let mut range = IntRange::ANY;
    if let Some(f) = bound("minimum")? {
        range.min = range.min.max(clamp(f.ceil()));
    }
    if let Some(f) = bound("exclusiveMinimum")? {
        range.min = range.min.max(clamp(f.floor()).saturating_add(1));
    }
    if let Some(f) = bound("maximum")? {
        range.max = range.max.min(clamp(f.floor()));
    }
    if let Some(f) = bound("exclusiveMaximum")? {
        range.max = range.max.min(clamp(f.ceil()).saturating_sub(1));
    }
    if range.min > range.max {
        return Err(SchemaError::at(
            path,
            format!("no integer lies between {} and {}", range.min, range.max),
        ));
    }
    Ok(range)
}

/// A string node with the `minLength` / `maxLength` bounds of `map`.
pub(super) fn string_node(
    map: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<Node, SchemaError> {
    let (min, max) = count_bounds(map, path, "minLength", "maxLength")?;
    Ok(Node::String {
        min,
        max,
        pattern: None,
    })
}

/// A `(min, max)` pair of counts (`minLength`/`maxLength`, `minItems`/`maxItems`): each a
/// non-negative integer (past `u32::MAX` it saturates), the pair not empty.
pub(super) fn count_bounds(
    map: &serde_json::Map<String, Value>,
    path: &str,
    min_key: &str,
    max_key: &str,
) -> Result<(u32, u32), SchemaError> {
    let bound = |key: &str, default: u32| -> Result<u32, SchemaError> {
        match map.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                .ok_or_else(|| {
                    SchemaError::at(path, format!("{key} must be a non-negative integer"))
                }),
        }
    };
    let (min, max) = (bound(min_key, 0)?, bound(max_key, u32::MAX)?);
    if min > max {
        return Err(SchemaError::at(
            path,
            format!("{min_key} {min} exceeds {max_key} {max}"),
        ));
    }
    Ok((min, max))
}

impl Compiler<'_> {
    /// A non-integer number: its range keywords as an expression over the digits
    /// ([`decimal_range`]), kept with the patterns.
    pub(super) fn number(
        &mut self,
        map: &serde_json::Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaError> {
        let mut node = Node::Number {
            integer: false,
            range: IntRange::ANY,
            decimal: None,
        };
        if !RANGE_KEYWORDS.iter().any(|k| map.contains_key(*k)) {
            return Ok(node);
        }
        let compiled = real_range(map, path).and_then(|(min, max)| {
            let pattern = decimal_range::decimal_range_regex(min, max).ok_or_else(|| {
                SchemaError::at(path, "no number lies between the schema's bounds")
            })?;
            Regex::compile(&pattern).map_err(|e| SchemaError::at(path, e.to_string()))
        });
        match compiled {
            Ok(regex) if self.patterns.len() < usize::from(u16::MAX) => {
                if let Node::Number { decimal, .. } = &mut node {
                    *decimal = Some(self.patterns.len() as u16);
                }
                self.patterns.push(Arc::new(regex));
            }
            // Relaxed (tool arguments): left out and reported, as other keywords.
            _ if self.relaxed => {
                let ranged = RANGE_KEYWORDS.iter().filter(|k| map.contains_key(**k));
                self.ignored
                    .extend(ranged.map(|key| format!("{path}/{key}")));
            }
            Ok(_) => return Err(SchemaError::at(path, "the schema has too many patterns")),
            Err(e) => return Err(e),
        }
        Ok(node)
    }
}
