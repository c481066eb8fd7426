//! A JSON prefix scanner: where a value starting at a byte ends, whether the text so far can
//! still become one, or the byte at which it stops being one. Iterative (an explicit bracket
//! stack), so deeply nested garbage cannot overflow the call stack.

/// How far a JSON value reaches in the text so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// The value ends just before this byte.
    Complete(usize),
    /// Every byte so far fits; the value is not finished (a number at the very end counts as
    /// unfinished: more digits may follow).
    Incomplete,
    /// The byte at this offset cannot continue the value (always a char boundary).
    Invalid(usize),
}

/// The end of a complete scalar, or returns the scalar's `Incomplete`/`Invalid` from the
/// enclosing function.
macro_rules! scalar {
    ($scan:expr) => {
        match $scan {
            Scan::Complete(end) => end,
            other => return other,
        }
    };
}

/// The first byte at or after `i` that is not JSON whitespace.
pub(super) fn skip_ws(s: &str, mut i: usize) -> usize {
    let b = s.as_bytes();
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

#[derive(Clone, Copy)]
enum Want {
    Value,
    FirstValueOrEnd,
    FirstKeyOrEnd,
    Key,
    Colon,
    Next,
}

/// Scans the JSON value whose first byte is at `start`.
pub(super) fn scan_value(s: &str, start: usize) -> Scan {
    let b = s.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut want = Want::Value;
    let mut i = start;
    loop {
        if !matches!(want, Want::Value) || i != start {
            i = skip_ws(s, i);
        }
        let Some(&c) = b.get(i) else {
            return Scan::Incomplete;
        };
        match want {
            Want::Value | Want::FirstValueOrEnd => {
                if matches!(want, Want::FirstValueOrEnd) && c == b']' {
                    stack.pop();
                    i += 1;
                } else {
                    match c {
                        b'{' | b'[' => {
                            stack.push(c);
                            want = if c == b'{' {
                                Want::FirstKeyOrEnd
                            } else {
                                Want::FirstValueOrEnd
                            };
                            i += 1;
                            continue;
                        }
                        b'"' => i = scalar!(scan_string(s, i)),
                        b'-' | b'0'..=b'9' => i = scalar!(scan_number(s, i)),
                        b't' => i = scalar!(scan_literal(s, i, "true")),
                        b'f' => i = scalar!(scan_literal(s, i, "false")),
                        b'n' => i = scalar!(scan_literal(s, i, "null")),
                        _ => return Scan::Invalid(i),
                    }
                }
                if stack.is_empty() {
                    return Scan::Complete(i);
                }
                want = Want::Next;
            }
            Want::FirstKeyOrEnd | Want::Key => {
                if matches!(want, Want::FirstKeyOrEnd) && c == b'}' {
                    stack.pop();
                    i += 1;
                    if stack.is_empty() {
                        return Scan::Complete(i);
                    }
                    want = Want::Next;
                } else if c == b'"' {
                    i = scalar!(scan_string(s, i));
                    want = Want::Colon;
                } else {
                    return Scan::Invalid(i);
                }
            }
            Want::Colon if c == b':' => {
                i += 1;
                want = Want::Value;
                i = skip_ws(s, i);
                if i >= b.len() {
                    return Scan::Incomplete;
                }
            }
            Want::Colon => return Scan::Invalid(i),
            Want::Next => {
                let top = *stack.last().unwrap_or(&b'[');
                match c {
                    b',' => {
                        want = if top == b'{' { Want::Key } else { Want::Value };
                        i = skip_ws(s, i + 1);
                        if i >= b.len() {
                            return Scan::Incomplete;
                        }
                    }
                    b'}' | b']' if (c == b'}') == (top == b'{') => {
                        stack.pop();
                        i += 1;
                        if stack.is_empty() {
                            return Scan::Complete(i);
                        }
                    }
                    _ => return Scan::Invalid(i),
                }
            }
        }
    }
}

/// Scans the JSON string whose opening quote is at `start`.
pub(super) fn scan_string(s: &str, start: usize) -> Scan {
    let b = s.as_bytes();
    let mut i = start + 1;
    loop {
        let Some(&c) = b.get(i) else {
            return Scan::Incomplete;
        };
        match c {
            b'"' => return Scan::Complete(i + 1),
            b'\\' => {
                let Some(&e) = b.get(i + 1) else {
                    return Scan::Incomplete;
                };
                match e {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' => {
                        for k in i + 2..i + 6 {
                            match b.get(k) {
                                None => return Scan::Incomplete,
                                Some(h) if h.is_ascii_hexdigit() => {}
                                Some(_) => return Scan::Invalid(k),
                            }
                        }
                        i += 6;
                    }
                    _ => return Scan::Invalid(i + 1),
                }
            }
            0..=0x1f => return Scan::Invalid(i),
            _ => i += 1,
        }
    }
}

/// Scans the JSON number starting at `start` (`-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`).
fn scan_number(s: &str, start: usize) -> Scan {
    let b = s.as_bytes();
    let mut i = start;
    let digits = |i: &mut usize| {
        let from = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > from
    };
    if b[i] == b'-' {
        i += 1;
    }
    match b.get(i) {
        None => return Scan::Incomplete,
        Some(b'0') => i += 1,
        Some(c) if c.is_ascii_digit() => {
            digits(&mut i);
        }
        Some(_) => return Scan::Invalid(i),
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return if i >= b.len() {
                Scan::Incomplete
            } else {
                Scan::Invalid(i)
            };
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return if i >= b.len() {
                Scan::Incomplete
            } else {
                Scan::Invalid(i)
            };
        }
    }
    if i >= b.len() {
        Scan::Incomplete
    } else {
        Scan::Complete(i)
    }
}

/// Scans `literal` (`true`, `false`, `null`) at `start`.
fn scan_literal(s: &str, start: usize, literal: &str) -> Scan {
    let b = s.as_bytes();
    for (k, &want) in literal.as_bytes().iter().enumerate() {
        match b.get(start + k) {
            None => return Scan::Incomplete,
            Some(&c) if c == want => {}
            Some(_) => return Scan::Invalid(start + k),
        }
    }
    Scan::Complete(start + literal.len())
}
