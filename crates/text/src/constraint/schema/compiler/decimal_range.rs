//! The JSON numbers inside a range of real values, as a regular expression: what enforces
//! `minimum` / `maximum` (and the exclusive forms) on a `"type": "number"` while it is written.
//!
//! The expression accepts exactly the JSON numbers without exponent whose value lies in the
//! range (a bounded number is written out in plain decimal) with at most 16 digits after the
//! point (more when a bound has more) and, unbounded above, at most 20 before it, every prefix
//! of one of them and no dead end: the regex machinery refuses a byte from which no accepted number remains. The
//! bounds are read as the shortest decimal that round-trips their `f64` (`0.1` is 0.1, not the
//! binary fraction next to it); `-0` is not written (0 is, when the range holds it).
//!
//! Built digit by digit: an integer part between two digit strings (one alternative per
//! length, and per digit where the bounds' digits part), then a fraction constrained by the
//! bounds' own fractions only where the integer part equals a bound's.

/// A non-negative decimal: integer digits without leading zeros (`"0"` for zero) and fraction
/// digits without trailing zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    int: Vec<u8>,
    frac: Vec<u8>,
}

impl Decimal {
    /// `|f|` as the shortest decimal that round-trips (`f` finite).
    fn of(f: f64) -> Decimal {
        let text = format!("{}", f.abs());
        let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
        let int = int.trim_start_matches('0');
        Decimal {
            int: if int.is_empty() {
                b"0".to_vec()
            } else {
                int.as_bytes().to_vec()
            },
            frac: frac.trim_end_matches('0').as_bytes().to_vec(),
        }
    }

    fn zero() -> Decimal {
        Decimal {
            int: b"0".to_vec(),
            frac: Vec::new(),
        }
    }

    fn is_zero(&self) -> bool {
        self.int == b"0" && self.frac.is_empty()
    }

    fn cmp(&self, other: &Decimal) -> std::cmp::Ordering {
        let by_int = (self.int.len(), &self.int).cmp(&(other.int.len(), &other.int));
        by_int.then_with(|| self.frac.cmp(&other.frac))
    }
}

/// Most digits after the point (or the bounds' own, when longer): past an `f64`'s 15-17
/// significant digits more change nothing, and a weak model could spend its whole budget on
/// them, as on whitespace.
const MAX_FRACTION_DIGITS: usize = 16;

/// Most integer digits of a number with no upper bound (or the lower bound's, and one more).
const MAX_INTEGER_DIGITS: usize = 20;

/// A bound: the value and whether it is in the range.
type Bound = (Decimal, bool);

/// The integer digits past which a bound is refused: the expression grows with the square of
/// the bound's length.
pub(super) const MAX_BOUND_DIGITS: usize = 40;

/// The expression for the JSON numbers `x` with `min ⋈ x ⋈ max` (`None`: unbounded; the flag
/// says inclusive). `None` when no number is in the range.
pub(super) fn decimal_range_regex(
    min: Option<(f64, bool)>,
    max: Option<(f64, bool)>,
) -> Option<String> {
    let min = min.map(|(f, incl)| (f < 0.0, (Decimal::of(f), incl)));
    let max = max.map(|(f, incl)| (f < 0.0, (Decimal::of(f), incl)));
    // x >= 0 part: from max(min, 0), up to max unless max is negative.
    let positive_part = match (&min, &max) {
        (_, Some((true, _))) => None,
        (Some((false, lo)), hi) => non_negative(lo, hi.as_ref().map(|(_, b)| b)),
        (_, hi) => non_negative(&(Decimal::zero(), true), hi.as_ref().map(|(_, b)| b)),
    };
    // x < 0 part, as y = -x > 0: from |max| (or above 0) up to |min|.
    let negative = match (&min, &max) {
        (Some((false, _)), _) => None,
        (lo, Some((true, hi))) => non_negative(hi, lo.as_ref().map(|(_, b)| b)),
        (lo, _) => non_negative(&(Decimal::zero(), false), lo.as_ref().map(|(_, b)| b)),
    };
    match (positive_part, negative) {
        (None, None) => None,
        (Some(p), None) => Some(p),
        (None, Some(n)) => Some(format!("-(?:{n})")),
        (Some(p), Some(n)) => Some(format!("(?:{p})|-(?:{n})")),
    }
}

/// The numbers `y >= 0` with `lo ⋈ y ⋈ hi` (written without sign).
fn non_negative(lo: &Bound, hi: Option<&Bound>) -> Option<String> {
    if let Some((b, b_incl)) = hi {
        match lo.0.cmp(b) {
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Equal if !(lo.1 && *b_incl) => return None,
            _ => {}
        }
        // A bound 0 excluded from above leaves nothing non-negative.
        if b.is_zero() && !b_incl {
            return None;
        }
    }
    let (a, a_incl) = lo;
    let frac_lo = Some((a.frac.as_slice(), *a_incl));
    let mut alternatives = Vec::new();
    let mut push = |int: String, fraction: Option<String>| {
        if let Some(fraction) = fraction {
            alternatives.push(format!("{int}{fraction}"));
        }
    };
    match hi {
        Some((b, b_incl)) if a.int == b.int => {
            let frac_hi = Some((b.frac.as_slice(), *b_incl));
            push(literal(&a.int), fraction(frac_lo, frac_hi));
        }
        _ => {
            push(literal(&a.int), fraction(frac_lo, None));
            let first = increment(&a.int);
            let middle = match hi {
                Some((b, _)) => {
                    let last = decrement(&b.int);
                    (compare(&first, &last) != std::cmp::Ordering::Greater)
                        .then(|| integer_range(&first, Some(&last)))
                }
                None => Some(integer_range(&first, None)),
            };
            if let Some(middle) = middle {
                push(format!("(?:{middle})"), fraction(None, None));
            }
            if let Some((b, b_incl)) = hi {
                push(
                    literal(&b.int),
                    fraction(None, Some((b.frac.as_slice(), *b_incl))),
                );
            }
        }
    }
    (!alternatives.is_empty()).then(|| alternatives.join("|"))
}

/// The optional fraction (`""` or `.` and digits) of a number whose integer part is fixed,
/// with its value `0.s` in `lo ⋈ 0.s ⋈ hi` (`None`: 0 and 1 excluded, the natural limits).
/// `None` when no fraction fits.
fn fraction(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>) -> Option<String> {
    let longest = [lo, hi]
        .iter()
        .flatten()
        .map(|(d, _)| d.len())
        .max()
        .unwrap_or(0);
    let (empty, digits) = fraction_digits(lo, hi, MAX_FRACTION_DIGITS.max(longest));
    match (empty, digits) {
        (true, Some(d)) => Some(format!("(?:\\.(?:{d}))?")),
        (true, None) => Some(String::new()),
        (false, Some(d)) => Some(format!("\\.(?:{d})")),
        (false, None) => None,
    }
}

/// For fraction digits `s` with `lo ⋈ 0.s ⋈ hi` (bounds as fraction digit strings without
/// trailing zeros): whether the empty `s` (value 0) fits, and an expression for the
/// non-empty ones (`None`: none fits).
fn fraction_digits(
    lo: Option<(&[u8], bool)>,
    hi: Option<(&[u8], bool)>,
    left: usize,
) -> (bool, Option<String>) {
    // A lower bound 0 included is no bound.
    let lo = lo.filter(|(d, incl)| !(d.is_empty() && *incl));
    if left == 0 {
        // No digit may follow: only the value so far, when the bounds let it be.
        let fits = lo.is_none() && hi.is_none_or(|(h, incl)| !h.is_empty() || incl);
        return (fits, None);
    }
    match (lo, hi) {
        (None, None) => return (true, Some(format!("[0-9]{{1,{left}}}"))),
        // Upper bound 0: only zeros, if 0 itself is in.
        (lo, Some((&[], incl))) => {
            return match lo.is_none() && incl {
                true => (true, Some(format!("0{{1,{left}}}"))),
                false => (false, None),
            };
        }
        // Above 0: some digit, within `left`, is not a zero.
        (Some((&[], false)), None) => {
            let options: Vec<String> = (0..left)
                .map(|zeros| format!("0{{{zeros}}}[1-9][0-9]{{0,{}}}", left - 1 - zeros))
                .collect();
            return (false, Some(options.join("|")));
        }
        _ => {}
    }
    // Value 0 (no digits): above a lower bound only when there is none; below any non-zero
    // upper bound.
    let empty = lo.is_none();
    let mut alternatives = Vec::new();
    let mut c = 0u8;
    while c <= 9 {
        // Where the first digit `c` leaves each bound: satisfied (`None`), still binding on
        // the rest (`Some`), or broken (skip).
        let next_lo = match lo {
            None => Some(None),
            Some((l, incl)) => {
                let (d, rest) = first_digit(l);
                match c.cmp(&d) {
                    std::cmp::Ordering::Greater => Some(None),
                    std::cmp::Ordering::Equal => Some(Some((rest, incl))),
                    std::cmp::Ordering::Less => None,
                }
            }
        };
        let next_hi = match hi {
            None => Some(None),
            Some((h, incl)) => {
                let (d, rest) = first_digit(h);
                match c.cmp(&d) {
                    std::cmp::Ordering::Less => Some(None),
                    std::cmp::Ordering::Equal => Some(Some((rest, incl))),
                    std::cmp::Ordering::Greater => None,
                }
            }
        };
        let (Some(next_lo), Some(next_hi)) = (next_lo, next_hi) else {
            c += 1;
            continue;
        };
        // Digits after `c` that leave both bounds as `c` does form one class.
        let mut last = c;
        while last < 9 && same_class(lo, hi, c, last + 1) {
            last += 1;
        }
        let class = if c == last {
            format!("{c}")
        } else {
            format!("[{c}-{last}]")
        };
        let (rest_empty, rest) = fraction_digits(next_lo, next_hi, left - 1);
        let rest = match (rest_empty, rest) {
            (true, Some(r)) => Some(format!("(?:{r})?")),
            (true, None) => Some(String::new()),
            (false, Some(r)) => Some(format!("(?:{r})")),
            (false, None) => None,
        };
        if let Some(rest) = rest {
            alternatives.push(format!("{class}{rest}"));
        }
        c = last + 1;
    }
    let digits = (!alternatives.is_empty()).then(|| alternatives.join("|"));
    (empty, digits)
}

/// Whether first digits `a` and `b` leave the bounds alike (both strictly inside them).
fn same_class(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>, a: u8, b: u8) -> bool {
    let side = |bound: Option<(&[u8], bool)>| bound.map(|(d, _)| first_digit(d).0);
    let pos = |digit: Option<u8>, c: u8| digit.map(|d| c.cmp(&d));
    pos(side(lo), a) == pos(side(lo), b) && pos(side(hi), a) == pos(side(hi), b)
}

/// The first digit of fraction digits and the rest (an empty string reads as zeros).
fn first_digit(digits: &[u8]) -> (u8, &[u8]) {
    match digits.split_first() {
        Some((d, rest)) => (d - b'0', rest),
        None => (0, digits),
    }
}

/// Integer digit strings (no leading zeros) from `lo` to `hi` inclusive (`None`: no end),
/// `lo <= hi`.
fn integer_range(lo: &[u8], hi: Option<&[u8]>) -> String {
    let mut alternatives = Vec::new();
    let top = hi.map_or(lo.len(), <[u8]>::len);
    for len in lo.len()..=top {
        let from = if len == lo.len() {
            lo.to_vec()
        } else {
            let mut v = vec![b'0'; len];
            v[0] = b'1';
            v
        };
        let to = match hi {
            Some(h) if len == h.len() => h.to_vec(),
            _ => vec![b'9'; len],
        };
        alternatives.push(format!("(?:{})", same_length(&from, &to)));
    }
    if hi.is_none() {
        let most = MAX_INTEGER_DIGITS.max(lo.len() + 1);
        alternatives.push(format!("[1-9][0-9]{{{},{}}}", lo.len(), most - 1));
    }
    alternatives.join("|")
}

/// Digit strings of one length from `lo` to `hi` inclusive.
fn same_length(lo: &[u8], hi: &[u8]) -> String {
    let Some((&l, lo_rest)) = lo.split_first() else {
        return String::new();
    };
    let (&h, hi_rest) = hi.split_first().expect("same length");
    if l == h {
        return format!("{}(?:{})", l as char, same_length(lo_rest, hi_rest));
    }
    let k = lo_rest.len();
    let mut alternatives = vec![format!("{}(?:{})", l as char, at_least(lo_rest))];
    if h - l >= 2 {
        alternatives.push(format!(
            "[{}-{}][0-9]{{{k}}}",
            (l + 1) as char,
            (h - 1) as char
        ));
    }
    alternatives.push(format!("{}(?:{})", h as char, at_most(hi_rest)));
    alternatives.join("|")
}

/// Digit strings of `s`'s length that are at least `s`.
fn at_least(s: &[u8]) -> String {
    match s.split_first() {
        None => String::new(),
        Some(_) if s.iter().all(|&d| d == b'0') => format!("[0-9]{{{}}}", s.len()),
        Some((&d, rest)) => {
            let mut out = format!("{}(?:{})", d as char, at_least(rest));
            if d < b'9' {
                out += &format!("|[{}-9][0-9]{{{}}}", (d + 1) as char, rest.len());
            }
            out
        }
    }
}

/// Digit strings of `s`'s length that are at most `s`.
fn at_most(s: &[u8]) -> String {
    match s.split_first() {
        None => String::new(),
        Some(_) if s.iter().all(|&d| d == b'9') => format!("[0-9]{{{}}}", s.len()),
        Some((&d, rest)) => {
            let mut out = format!("{}(?:{})", d as char, at_most(rest));
            if d > b'0' {
                out += &format!("|[0-{}][0-9]{{{}}}", (d - 1) as char, rest.len());
            }
            out
        }
    }
}

fn literal(digits: &[u8]) -> String {
    String::from_utf8(digits.to_vec()).expect("digits")
}

fn compare(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    (a.len(), a).cmp(&(b.len(), b))
}

/// `n + 1` for integer digits `n`.
fn increment(n: &[u8]) -> Vec<u8> {
    let mut out = n.to_vec();
    for d in out.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return out;
        }
    }
    out.insert(0, b'1');
    out
}

/// `n - 1` for integer digits `n > 0` (`"0"` stays `"0"`, and is not asked for: an integer
/// part below the upper bound's exists only when that is above 0).
fn decrement(n: &[u8]) -> Vec<u8> {
    if n == b"0" {
        // Below 0: an empty range, as `compare` sees `"0"` (below 1) from any `first >= 1`.
        return b"0".to_vec();
    }
    let mut out = n.to_vec();
    for d in out.iter_mut().rev() {
        if *d == b'0' {
            *d = b'9';
        } else {
            *d -= 1;
            break;
        }
    }
    while out.len() > 1 && out[0] == b'0' {
        out.remove(0);
    }
    out
}

#[cfg(test)]
#[path = "decimal_range_tests.rs"]
mod tests;
