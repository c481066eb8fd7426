//! Values of command-line flags that several commands share.

/// A positive number of seconds (fractions allowed).
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs < 1e9 => Ok(secs),
        _ => Err(format!("`{text}` is not a positive number of seconds")),
    }
}
