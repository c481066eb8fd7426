//! A hand-written SVG chart of benchmark runs: output throughput and median time to first token
//! against concurrency, one line per run.

use std::fmt::Write as _;

use super::report::{BenchReport, LevelReport};

const PANEL_WIDTH: f64 = 460.0;
const WIDTH: f64 = 2.0 * PANEL_WIDTH + 20.0;
const HEIGHT: f64 = 420.0;
/// Plot area inside a panel, relative to the panel's left edge and the image's top.
const PLOT_LEFT: f64 = 70.0;
const PLOT_RIGHT: f64 = PANEL_WIDTH - 20.0;
const PLOT_TOP: f64 = 60.0;
const PLOT_BOTTOM: f64 = 330.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

struct Panel {
    title: &'static str,
    y_label: &'static str,
    value: fn(&LevelReport) -> Option<f64>,
}

const PANELS: [Panel; 2] = [
    Panel {
        title: "Output throughput",
        y_label: "tokens/s",
        value: |l| Some(l.output_tokens_per_s),
    },
    Panel {
        title: "Time to first token (p50)",
        y_label: "ms",
        value: |l| l.ttft_ms.map(|t| t.p50),
    },
];

/// Escapes text for XML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A round axis maximum at or above `max` and its tick step (1, 2 or 5 times a power of ten),
/// giving at most eight intervals.
fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let rough = max / 8.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

fn format_tick(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    format!("{value:.decimals$}")
}

/// Renders `reports` as one SVG document with a throughput panel and a TTFT panel.
pub fn render_chart(title: &str, reports: &[BenchReport]) -> String {
    let mut levels: Vec<usize> = reports
        .iter()
        .flat_map(|r| r.levels.iter().map(|l| l.concurrency.max(1)))
        .collect();
    levels.sort_unstable();
    levels.dedup();
    let log_min = levels.first().map_or(0.0, |&c| (c as f64).log2());
    let log_max = levels.last().map_or(0.0, |&c| (c as f64).log2());
    let x_of = |panel_left: f64, concurrency: usize| {
        let span = PLOT_RIGHT - PLOT_LEFT;
        let fraction = if log_max > log_min {
            ((concurrency.max(1) as f64).log2() - log_min) / (log_max - log_min)
        } else {
            0.5
        };
        panel_left + PLOT_LEFT + fraction * span
    };

    let mut svg = String::new();
    let _ = writeln!(svg, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="16">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    for (index, panel) in PANELS.iter().enumerate() {
        let left = index as f64 * (PANEL_WIDTH + 20.0);
        let max = reports
            .iter()
            .flat_map(|r| r.levels.iter().filter_map(panel.value))
            .fold(0.0, f64::max);
        let (y_max, step) = nice_axis(max);
        let y_of = |v: f64| PLOT_BOTTOM - (v / y_max) * (PLOT_BOTTOM - PLOT_TOP);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="48" text-anchor="middle" font-size="14">{}</text>"#,
            left + (PLOT_LEFT + PLOT_RIGHT) / 2.0,
            escape(panel.title)
        );
        let ticks = (y_max / step).round() as usize;
        for tick in (0..=ticks).map(|i| i as f64 * step) {
            let y = y_of(tick);
            let _ = writeln!(
                svg,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + PLOT_LEFT,
                left + PLOT_RIGHT,
                left + PLOT_LEFT - 6.0,
                y + 4.0,
                format_tick(tick, step)
            );
        }
        for &concurrency in &levels {
            let x = x_of(left, concurrency);
            let _ = writeln!(
                svg,
                r#"<text x="{x:.1}" y="{}" text-anchor="middle">{concurrency}</text>"#,
                PLOT_BOTTOM + 18.0
            );
        }
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{PLOT_TOP}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
            left + PLOT_LEFT,
            PLOT_RIGHT - PLOT_LEFT,
            PLOT_BOTTOM - PLOT_TOP
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">concurrent streams</text>"#,
            left + (PLOT_LEFT + PLOT_RIGHT) / 2.0,
            PLOT_BOTTOM + 36.0
        );
        let y_mid = (PLOT_TOP + PLOT_BOTTOM) / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{y_mid:.1}" text-anchor="middle" transform="rotate(-90 {:.1} {y_mid:.1})">{}</text>"#,
            left + 18.0,
            left + 18.0,
            escape(panel.y_label)
        );
        for (series, report) in reports.iter().enumerate() {
            let color = COLORS[series % COLORS.len()];
            let points: Vec<(f64, f64)> = report
                .levels
                .iter()
                .filter_map(|l| Some((x_of(left, l.concurrency), y_of((panel.value)(l)?))))
                .collect();
            let path: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for (x, y) in points {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
                );
            }
        }
    }
    for (series, report) in reports.iter().enumerate() {
        let x = 80.0 + series as f64 * 200.0;
        let y = HEIGHT - 22.0;
        let color = COLORS[series % COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            x + 24.0,
            x + 30.0,
            y + 4.0,
            escape(&report.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::LatencyMs;

    /// Checks that `xml` is well formed: balanced tags, quoted attributes, escaped text.
    /// Returns the element names in document order.
    fn parse_elements(xml: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let mut rest = xml.trim_start();
        if let Some(after) = rest.strip_prefix("<?xml") {
            rest = &after[after.find("?>").ok_or("unterminated declaration")? + 2..];
        }
        while !rest.is_empty() {
            let Some(open) = rest.find('<') else {
                check_text(rest)?;
                break;
            };
            check_text(&rest[..open])?;
            let close = rest[open..].find('>').ok_or("unterminated tag")? + open;
            let tag = &rest[open + 1..close];
            if let Some(name) = tag.strip_prefix('/') {
                let top = stack.pop().ok_or(format!("unmatched </{name}>"))?;
                if top != name.trim() {
                    return Err(format!("<{top}> closed by </{name}>"));
                }
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name = body
                    .split_whitespace()
                    .next()
                    .ok_or("empty tag")?
                    .to_owned();
                check_attributes(&body[name.len()..])?;
                names.push(name.clone());
                if !self_closing {
                    stack.push(name);
                }
            }
            rest = &rest[close + 1..];
            if stack.is_empty() && !rest.trim().is_empty() {
                return Err("content after the root element".into());
            }
        }
        if stack.is_empty() {
            Ok(names)
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    fn check_text(text: &str) -> Result<(), String> {
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..text[i..].find(';').map_or(text.len(), |e| i + e + 1)];
            if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&entity) {
                return Err(format!("bad entity in {text:?}"));
            }
        }
        Ok(())
    }

    fn check_attributes(mut attrs: &str) -> Result<(), String> {
        loop {
            attrs = attrs.trim_start();
            if attrs.is_empty() {
                return Ok(());
            }
            let eq = attrs
                .find('=')
                .ok_or(format!("attribute without value: {attrs}"))?;
            let value = attrs[eq + 1..]
                .strip_prefix('"')
                .ok_or("unquoted attribute")?;
            let end = value.find('"').ok_or("unterminated attribute")?;
            check_text(&value[..end])?;
            attrs = &value[end + 1..];
        }
    }

    fn run(label: &str, points: &[(usize, f64, Option<f64>)]) -> BenchReport {
        let levels = points
            .iter()
            .map(|&(concurrency, tokens, ttft)| LevelReport {
                concurrency,
                window_s: 1.0,
                requests_completed: 1,
                requests_per_s: 1.0,
                output_tokens_per_s: tokens,
                ttft_ms: ttft.map(|p50| LatencyMs { p50, p99: p50 }),
                itl_ms: None,
                e2e_ms_p50: None,
                prompt_tokens_mean: None,
                completion_tokens_mean: None,
                errors: 0,
                cut: 0,
                error_samples: vec![],
            })
            .collect();
        BenchReport {
            label: label.into(),
            base_url: String::new(),
            model: String::new(),
            prompt_tokens_target: 128,
            prompt_tokens_calibrated: None,
            output_tokens: 128,
            warmup_s: 0.0,
            duration_s: 1.0,
            started_unix_s: 0,
            levels,
        }
    }

    #[test]
    fn chart_is_well_formed_xml_with_one_line_per_run_and_panel() {
        let reports = [
            run(
                "sluice <fast> & \"new\"",
                &[
                    (1, 30.0, Some(40.0)),
                    (4, 90.0, Some(60.0)),
                    (16, 200.0, None),
                ],
            ),
            run(
                "llama-server",
                &[
                    (1, 28.0, Some(45.0)),
                    (4, 70.0, Some(90.0)),
                    (16, 120.0, Some(300.0)),
                ],
            ),
        ];
        let svg = render_chart("SmolLM2 & co", &reports);
        let elements = parse_elements(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert_eq!(elements[0], "svg");
        assert_eq!(elements.iter().filter(|e| *e == "polyline").count(), 4);
        // Throughput has 3 points per run; TTFT skips the missing one: 3 + 3 + 2 + 3 markers.
        assert_eq!(elements.iter().filter(|e| *e == "circle").count(), 11);
        assert!(svg.contains("sluice &lt;fast&gt; &amp; &quot;new&quot;"));
    }

    #[test]
    fn points_stay_inside_their_plot_area() {
        let svg = render_chart(
            "t",
            &[run("a", &[(1, 5.0, Some(1.0)), (64, 1234.5, Some(999.0))])],
        );
        for circle in svg.lines().filter(|l| l.starts_with("<circle")) {
            let number = |attr: &str| -> f64 {
                let start = circle.find(attr).unwrap() + attr.len() + 2;
                circle[start..start + circle[start..].find('"').unwrap()]
                    .parse()
                    .unwrap()
            };
            let (x, y) = (number("cx"), number("cy"));
            assert!((PLOT_LEFT..=WIDTH).contains(&x), "{circle}");
            assert!((PLOT_TOP..=PLOT_BOTTOM).contains(&y), "{circle}");
        }
    }

    #[test]
    fn the_minimal_xml_check_rejects_broken_documents() {
        assert!(parse_elements("<svg><g></svg>").is_err());
        assert!(parse_elements("<svg><text>a & b</text></svg>").is_err());
        assert!(parse_elements("<svg width=3/>").is_err());
        assert!(parse_elements("<svg/>").is_ok());
    }

    #[test]
    fn axis_maximum_is_round_and_covers_the_data() {
        assert_eq!(nice_axis(1234.5), (1400.0, 200.0));
        assert_eq!(nice_axis(9.0), (10.0, 2.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        let (max, step) = nice_axis(37.0);
        assert!(max >= 37.0 && (max / step - (max / step).round()).abs() < 1e-9);
    }
}
