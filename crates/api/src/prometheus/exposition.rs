//! The Prometheus text exposition format (version 0.0.4): metric headers, samples with
//! escaped labels, histograms.

use std::fmt::Write;

use sluice_engine::HistogramSnapshot;

/// The `# HELP` and `# TYPE` lines of a metric family.
pub(super) fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One sample line: `name{labels} value`, label values escaped.
pub(super) fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"");
            escape_label(out, val);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    write_value(out, value);
    out.push('\n');
}

/// A histogram's cumulative buckets, `+Inf` bucket, sum and count for one model.
pub(super) fn histogram(out: &mut String, name: &str, model: &str, h: &HistogramSnapshot) {
    let bucket = format!("{name}_bucket");
    for (bound, count) in h.bounds.iter().zip(&h.counts) {
        let mut le = String::new();
        write_value(&mut le, *bound);
        sample(
            out,
            &bucket,
            &[("le", &le), ("model_name", model)],
            *count as f64,
        );
    }
    sample(
        out,
        &bucket,
        &[("le", "+Inf"), ("model_name", model)],
        h.count as f64,
    );
    sample(out, &format!("{name}_sum"), &[("model_name", model)], h.sum);
    sample(
        out,
        &format!("{name}_count"),
        &[("model_name", model)],
        h.count as f64,
    );
}

/// A sample value as Prometheus writes it: integers without a fraction, `NaN`, `±Inf`.
pub(super) fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// A label value with backslash, quote and newline escaped.
fn escape_label(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}
