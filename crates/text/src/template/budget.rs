//! The budget a chat template renders under. A template is untrusted code: two nested
//! `range(100000)` loops never end, and 64 rounds of `{% set ns.s = ns.s ~ ns.s %}` ask for
//! 2^64 bytes. A render therefore has
//!
//! - fuel: minijinja counts the instructions it runs and stops at [`RenderLimits::fuel`];
//! - a size cap ([`RenderLimits::max_bytes`]) on every string it builds with `~`, `+`, `*`,
//!   `join`, `replace`, `indent`, `format`, the Python string methods and `tojson`, and on
//!   everything it writes (the prompt, captured blocks and macro output included); lists built
//!   with `+` and `*` are capped at [`RenderLimits::max_items`];
//! - a deadline ([`RenderLimits::timeout`]) and a cancel flag (set when the client goes away),
//!   checked at every one of those operations and every value written.
//!
//! minijinja has no hook for `~`, `+`, `*` or raw text, so `guard.rs` rewrites the
//! compiled program before each render: `~` becomes a call to a capped concatenation, `+` and `*`
//! a size check whose result is unpacked back onto the stack for the original instruction, and
//! raw text an emitted constant, so it passes the formatter, which counts it. Jump targets are
//! moved with the instructions.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use minijinja::value::{Rest, StringInput, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// What one render of a chat template may use. The defaults are far above what real
/// templates need (the 71 templates in the test data use at most a few thousand instructions
/// and write a few kilobytes for their test conversations; see docs/text.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderLimits {
    /// Template instructions one render may run (minijinja's fuel).
    pub fuel: u64,
    /// Largest string the template may build, and most bytes it may write.
    pub max_bytes: usize,
    /// Most items in a list the template builds with `+`, `*`, `list` (of a string), `split` or
    /// `splitlines`.
    pub max_items: usize,
    /// Longest a render may take.
    pub timeout: Duration,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            fuel: 20_000_000,
            max_bytes: 64 * 1024 * 1024,
            max_items: 1_000_000,
            timeout: Duration::from_secs(5),
        }
    }
}

/// The error a limit raises; [`super::template_error`] finds it under minijinja's error and
/// reports its message alone.
#[derive(Debug)]
pub(super) struct OverBudget(pub(super) String);

impl fmt::Display for OverBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OverBudget {}

fn over(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(OverBudget(message))
}

/// The render running on this thread.
struct Active {
    limits: RenderLimits,
    deadline: Option<Instant>,
    cancel: Option<Arc<AtomicBool>>,
    written: usize,
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
}

/// Arms the budget for a render on this thread until it is dropped.
pub(super) struct Armed(());

impl Armed {
    pub(super) fn new(limits: &RenderLimits, cancel: Option<Arc<AtomicBool>>) -> Armed {
        ACTIVE.with(|active| {
            *active.borrow_mut() = Some(Active {
                limits: limits.clone(),
                deadline: Instant::now().checked_add(limits.timeout),
                cancel,
                written: 0,
            })
        });
        Armed(())
    }
}

impl Armed {
    /// Bytes written so far.
    pub(super) fn written(&self) -> usize {
        with_active(|active| Ok(active.written), 0).unwrap_or(0)
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        ACTIVE.with(|active| active.borrow_mut().take());
    }
}

fn with_active<R>(f: impl FnOnce(&mut Active) -> Result<R, Error>, unarmed: R) -> Result<R, Error> {
    ACTIVE.with(|active| match active.borrow_mut().as_mut() {
        Some(active) => f(active),
        None => Ok(unarmed),
    })
}

/// Fails when the render is past its deadline or its client has gone.
pub(super) fn tick() -> Result<(), Error> {
    with_active(
        |active| {
            if active
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err(over("rendering was cancelled: the client went away".into()));
            }
            if active.deadline.is_some_and(|d| Instant::now() > d) {
                return Err(over(format!(
                    "chat template took longer than its limit of {} s",
                    active.limits.timeout.as_secs_f64()
                )));
            }
            Ok(())
        },
        (),
    )
}

/// The largest string a template may build (`usize::MAX` outside a render).
fn max_bytes() -> usize {
    with_active(|active| Ok(active.limits.max_bytes), usize::MAX).unwrap_or(usize::MAX)
}

fn check_bytes(len: usize) -> Result<(), Error> {
    let max = max_bytes();
    if len > max {
        return Err(over(format!(
            "chat template built a string over its limit of {max} bytes"
        )));
    }
    Ok(())
}

fn check_items(len: usize) -> Result<(), Error> {
    with_active(
        |active| match len > active.limits.max_items {
            true => Err(over(format!(
                "chat template built a list over its limit of {} items",
                active.limits.max_items
            ))),
            false => Ok(()),
        },
        (),
    )
}

/// Counts `len` more bytes written (to the prompt or a captured block).
pub(super) fn count_written(len: usize) -> Result<(), Error> {
    tick()?;
    with_active(
        |active| {
            active.written = active.written.saturating_add(len);
            match active.written > active.limits.max_bytes {
                true => Err(over(format!(
                    "rendered prompt exceeded its limit of {} bytes",
                    active.limits.max_bytes
                ))),
                false => Ok(()),
            }
        },
        (),
    )
}

/// A string that refuses to grow past a cap.
struct Capped {
    text: String,
    cap: usize,
    over: bool,
}

impl Capped {
    fn new(cap: usize) -> Capped {
        Capped {
            text: String::new(),
            cap,
            over: false,
        }
    }
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.text.len().saturating_add(s.len()) > self.cap {
            self.over = true;
            return Err(fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// Formats `value` as minijinja's `Display` does, failing past `max_bytes`.
fn display_capped(parts: &[&Value]) -> Result<String, Error> {
    let cap = max_bytes();
    let mut out = Capped::new(cap);
    let hint: usize = parts
        .iter()
        .map(|v| v.as_str().map_or(16, str::len))
        .fold(0usize, usize::saturating_add);
    out.text.reserve(hint.min(cap));
    for part in parts {
        if write!(out, "{part}").is_err() {
            return Err(match out.over {
                true => over(format!(
                    "chat template built a string over its limit of {cap} bytes"
                )),
                false => Error::new(ErrorKind::InvalidOperation, "formatting failed"),
            });
        }
    }
    Ok(out.text)
}

/// Bytes `value` takes written out (strings by length, lists and maps with their items and
/// separators, anything else as a short scalar), or `None` once that passes `cap`: walks at
/// most about `cap` items, so a list holding the same large string a million times is refused
/// without being written.
pub(super) fn written_size(value: &Value, cap: usize) -> Option<usize> {
    fn take(n: usize, left: &mut usize) -> bool {
        match left.checked_sub(n) {
            Some(rest) => {
                *left = rest;
                true
            }
            None => false,
        }
    }
    fn walk(value: &Value, left: &mut usize) -> bool {
        match value.kind() {
            ValueKind::String => take(value.as_str().map_or(0, str::len) + 2, left),
            ValueKind::Seq | ValueKind::Iterable => {
                let Ok(items) = value.try_iter() else {
                    return take(2, left);
                };
                for item in items {
                    if !take(2, left) || !walk(&item, left) {
                        return false;
                    }
                }
                take(2, left)
            }
            ValueKind::Map => {
                let Ok(keys) = value.try_iter() else {
                    return take(2, left);
                };
                for key in keys {
                    let item = value.get_item(&key).unwrap_or(Value::UNDEFINED);
                    if !take(4, left) || !walk(&key, left) || !walk(&item, left) {
                        return false;
                    }
                }
                take(2, left)
            }
            _ => take(32, left),
        }
    }
    let mut left = cap;
    walk(value, &mut left).then(|| cap - left)
}

fn check_written_size(value: &Value) -> Result<(), Error> {
    let cap = max_bytes();
    match written_size(value, cap) {
        Some(_) => Ok(()),
        None => Err(over(format!(
            "chat template built a string over its limit of {cap} bytes"
        ))),
    }
}

/// `a ~ b`: minijinja's concatenation (both sides as `Display` writes them), capped.
pub(super) fn concat(left: &Value, right: &Value) -> Result<Value, Error> {
    tick()?;
    display_capped(&[left, right]).map(Value::from)
}

fn is_list(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable)
}

/// The items in a list, counted (up to just over the limit) where it has no length, as a lazy
/// `select` or `map` has not.
fn items(value: &Value) -> usize {
    value.len().unwrap_or_else(|| {
        let max =
            with_active(|active| Ok(active.limits.max_items), usize::MAX).unwrap_or(usize::MAX);
        value
            .try_iter()
            .map_or(0, |iter| iter.take(max.saturating_add(1)).count())
    })
}

/// The `list` filter, refused for a string of more characters than a list may have items.
pub(super) fn list(state: &State, value: Value) -> Result<Value, Error> {
    tick()?;
    if let Some(s) = value.as_str() {
        check_items(s.chars().count())?;
    }
    minijinja::filters::list(state, value)
}

/// The operands of `left + right` back (reversed, for `UnpackList`), once the result fits.
pub(super) fn check_add(left: &Value, right: &Value) -> Result<Value, Error> {
    tick()?;
    if let (Some(a), Some(b)) = (left.as_str(), right.as_str()) {
        check_bytes(a.len().saturating_add(b.len()))?;
    } else if is_list(left) && is_list(right) {
        check_items(items(left).saturating_add(items(right)))?;
    }
    Ok(Value::from(vec![right.clone(), left.clone()]))
}

/// The operands of `left * right` back (reversed, for `UnpackList`), once the result fits.
pub(super) fn check_mul(left: &Value, right: &Value) -> Result<Value, Error> {
    tick()?;
    for (a, b) in [(left, right), (right, left)] {
        let Some(n) = b.as_usize() else { continue };
        if let Some(s) = a.as_str() {
            check_bytes(s.len().saturating_mul(n))?;
        } else if is_list(a) {
            check_items(a.len().unwrap_or(0).saturating_mul(n))?;
        }
    }
    Ok(Value::from(vec![right.clone(), left.clone()]))
}

/// The `join` filter, refused when the joined text would pass the cap.
pub(super) fn join(
    state: &State,
    value: &Value,
    joiner: Option<StringInput<'_>>,
) -> Result<Value, Error> {
    tick()?;
    let cap = max_bytes();
    let sep = joiner.as_ref().map_or(0, |j| j.as_str().len());
    let mut total = 0usize;
    if let Some(s) = value.as_str() {
        total = s.len().saturating_add(s.len().saturating_mul(sep));
    } else if let Ok(items) = value.try_iter() {
        for item in items {
            let size = written_size(&item, cap.saturating_sub(total)).unwrap_or(usize::MAX);
            total = total.saturating_add(size).saturating_add(sep);
            if total > cap {
                break;
            }
        }
    }
    check_bytes(total)?;
    minijinja::filters::join(state, value, joiner)
}

/// The `replace` filter, refused when the result would pass the cap.
pub(super) fn replace(
    state: &State,
    value: StringInput<'_>,
    from: StringInput<'_>,
    to: StringInput<'_>,
) -> Result<Value, Error> {
    tick()?;
    check_bytes(replaced_len(
        value.as_str(),
        from.as_str(),
        to.as_str(),
        None,
    ))?;
    minijinja::filters::replace(state, value, from, to)
}

/// An upper bound on the length of `s` with `count` (all when `None`) of `from` replaced by `to`.
fn replaced_len(s: &str, from: &str, to: &str, count: Option<usize>) -> usize {
    let found = match from.is_empty() {
        true => s.chars().count() + 1,
        false => s.matches(from).count(),
    };
    let found = count.map_or(found, |c| c.min(found));
    s.len().saturating_add(found.saturating_mul(to.len()))
}

/// The `indent` filter, refused when the indentation would pass the cap.
pub(super) fn indent(
    value: StringInput<'_>,
    width: Option<usize>,
    indent_first_line: Option<bool>,
    indent_blank_lines: Option<bool>,
    kwargs: minijinja::value::Kwargs,
) -> Result<Value, Error> {
    tick()?;
    let lines = value.as_str().lines().count() + 1;
    let width = match width {
        Some(width) => width,
        None => kwargs.get::<Option<usize>>("width")?.unwrap_or(4),
    };
    check_bytes(
        value
            .as_str()
            .len()
            .saturating_add(lines.saturating_mul(width)),
    )?;
    minijinja::filters::indent(
        value,
        Some(width),
        indent_first_line,
        indent_blank_lines,
        kwargs,
    )
}

/// The `format` filter, refused when its arguments alone would pass the cap.
pub(super) fn format(state: &State, format_str: &Value, args: Rest<Value>) -> Result<Value, Error> {
    tick()?;
    let cap = max_bytes();
    let mut total = format_str.as_str().map_or(0, str::len);
    for arg in args.iter() {
        total = total
            .saturating_add(written_size(arg, cap.saturating_sub(total)).unwrap_or(usize::MAX));
        if total > cap {
            break;
        }
    }
    check_bytes(total)?;
    let rv = minijinja::filters::format(state, format_str, args)?;
    check_bytes(rv.as_str().map_or(0, str::len))?;
    Ok(rv)
}

/// minijinja-contrib's Python methods, with `replace` and `join` refused before they build a
/// string over the cap, `split` and `splitlines` before they build a list over the item limit,
/// and every other string result checked after.
pub(super) fn python_method(
    state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    tick()?;
    if let Some(s) = value.as_str() {
        match (method, args) {
            ("replace", [from, to, rest @ ..]) => {
                if let (Some(from), Some(to)) = (from.as_str(), to.as_str()) {
                    let count = rest
                        .first()
                        .and_then(|c| i64::try_from(c.clone()).ok())
                        .and_then(|c| usize::try_from(c).ok());
                    check_bytes(replaced_len(s, from, to, count))?;
                }
            }
            ("split", args) => {
                let pieces = match args.first().and_then(Value::as_str) {
                    Some(sep) if !sep.is_empty() => s.matches(sep).count() + 1,
                    _ => s.split_whitespace().count(),
                };
                check_items(pieces)?;
            }
            ("splitlines", _) => check_items(s.lines().count())?,
            ("join", [items]) => {
                let cap = max_bytes();
                let mut total = 0usize;
                if let Ok(items) = items.try_iter() {
                    for item in items {
                        let size =
                            written_size(&item, cap.saturating_sub(total)).unwrap_or(usize::MAX);
                        total = total.saturating_add(size).saturating_add(s.len());
                        if total > cap {
                            break;
                        }
                    }
                }
                check_bytes(total)?;
            }
            _ => {}
        }
    }
    let rv = minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)?;
    check_bytes(rv.as_str().map_or(0, str::len))?;
    Ok(rv)
}

/// Checks that `value` can be written out within the cap (before `tojson`, `string` or the
/// formatter expands it).
pub(super) fn check_expandable(value: &Value) -> Result<(), Error> {
    tick()?;
    match value.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => check_written_size(value),
        _ => Ok(()),
    }
}
