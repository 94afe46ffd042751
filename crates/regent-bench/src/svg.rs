//! A hand-written SVG strip plot per case: one row per (store, tool), every
//! run a dot on a logarithmic time axis, with p50 and p99 marked.

use std::fmt::Write as _;
use std::time::Duration;

use crate::stats::Summary;

/// One row of a plot.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) label: String,
    /// regent's rows are drawn in one colour, the native tools' in another.
    pub(crate) regent: bool,
    pub(crate) samples: Vec<Duration>,
}

const WIDTH: f64 = 900.0;
const LEFT: f64 = 290.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 48.0;
const ROW: f64 = 36.0;
const BOTTOM: f64 = 62.0;
/// Samples below this are drawn at it (a log axis has no zero).
const FLOOR_MS: f64 = 0.1;

/// The plot of `rows` under `title`, as a complete SVG document.
pub(crate) fn strip_plot(title: &str, rows: &[Row]) -> String {
    let ms = |d: &Duration| (d.as_secs_f64() * 1e3).max(FLOOR_MS);
    let all: Vec<f64> = rows.iter().flat_map(|r| r.samples.iter().map(ms)).collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if all.is_empty() {
        (1.0, 10.0)
    } else {
        (lo, hi)
    };
    let mut d0 = lo.log10().floor();
    let mut d1 = hi.log10().ceil();
    if d1 <= d0 {
        d0 -= 0.5;
        d1 = d0 + 1.5;
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |v: f64| LEFT + (v.max(FLOOR_MS).log10() - d0) / (d1 - d0) * plot_w;
    let height = TOP + ROW * rows.len().max(1) as f64 + BOTTOM;
    let axis_y = TOP + ROW * rows.len().max(1) as f64;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="15" font-weight="bold" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );

    // Grid and axis: 1, 2, 5 times each power of ten in the range.
    let mut decade = d0 as i32;
    while f64::from(decade) <= d1 {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(decade);
            let lv = v.log10();
            if lv < d0 - 1e-9 || lv > d1 + 1e-9 {
                continue;
            }
            let xv = x(v);
            let major = m == 1.0;
            let _ = writeln!(
                s,
                r##"<line x1="{xv:.1}" y1="{TOP}" x2="{xv:.1}" y2="{axis_y}" stroke="{}" stroke-width="1"/>"##,
                if major { "#cccccc" } else { "#eeeeee" }
            );
            let _ = writeln!(
                s,
                r##"<text x="{xv:.1}" y="{:.1}" text-anchor="middle" fill="{}">{}</text>"##,
                axis_y + 18.0,
                if major { "#000000" } else { "#777777" },
                tick_label(v)
            );
        }
        decade += 1;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{axis_y}" x2="{:.1}" y2="{axis_y}" stroke="#000000"/>"##,
        WIDTH - RIGHT
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">signal → next leader's start (log scale)</text>"#,
        LEFT + plot_w / 2.0,
        axis_y + 40.0
    );

    for (i, row) in rows.iter().enumerate() {
        let cy = TOP + ROW * i as f64 + ROW / 2.0;
        let colour = if row.regent { "#1f5fa8" } else { "#d95f02" };
        if i % 2 == 1 {
            let _ = writeln!(
                s,
                r##"<rect x="0" y="{:.1}" width="{LEFT}" height="{ROW}" fill="#f6f6f6"/>"##,
                cy - ROW / 2.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 10.0,
            cy + 4.5,
            escape(&row.label)
        );
        for (j, d) in row.samples.iter().enumerate() {
            // A fixed spread, so that equal samples stay visible.
            let jitter = ((j * 7919) % 19) as f64 - 9.0;
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}" fill-opacity="0.5"/>"#,
                x(ms(d)),
                cy + jitter
            );
        }
        if let Some(summary) = Summary::of(&row.samples) {
            let p50 = x(ms(&summary.p50));
            let p99 = x(ms(&summary.p99));
            let _ = writeln!(
                s,
                r##"<line x1="{p50:.1}" y1="{:.1}" x2="{p50:.1}" y2="{:.1}" stroke="#000000" stroke-width="2.5"/>"##,
                cy - 14.0,
                cy + 14.0
            );
            let _ = writeln!(
                s,
                r##"<line x1="{p99:.1}" y1="{:.1}" x2="{p99:.1}" y2="{:.1}" stroke="#000000" stroke-width="1.5" stroke-dasharray="3,2"/>"##,
                cy - 14.0,
                cy + 14.0
            );
        }
    }

    // Legend.
    let ly = height - 10.0;
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{:.1}" x2="{LEFT}" y2="{:.1}" stroke="#000000" stroke-width="2.5"/><text x="{:.1}" y="{ly:.1}">p50</text>"##,
        ly - 11.0,
        ly + 1.0,
        LEFT + 6.0
    );
    let _ = writeln!(
        s,
        r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#000000" stroke-width="1.5" stroke-dasharray="3,2"/><text x="{:.1}" y="{ly:.1}">p99</text>"##,
        LEFT + 50.0,
        ly - 11.0,
        LEFT + 50.0,
        ly + 1.0,
        LEFT + 56.0
    );
    let _ = writeln!(
        s,
        r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#1f5fa8"/><text x="{:.1}" y="{ly:.1}">regent</text>"##,
        LEFT + 110.0,
        ly - 4.5,
        LEFT + 118.0
    );
    let _ = writeln!(
        s,
        r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#d95f02"/><text x="{:.1}" y="{ly:.1}">the engine's own tool</text>"##,
        LEFT + 180.0,
        ly - 4.5,
        LEFT + 188.0
    );
    s.push_str("</svg>\n");
    s
}

/// `v` milliseconds as an axis label: `0.5 ms`, `20 ms`, `2 s`.
fn tick_label(v: f64) -> String {
    if v >= 1000.0 {
        format!("{} s", trim(v / 1000.0))
    } else {
        format!("{} ms", trim(v))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `text` with XML's special characters escaped.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_has_a_row_and_a_dot_per_sample() {
        let rows = vec![
            Row {
                label: "etcd / regent run".into(),
                regent: true,
                samples: vec![Duration::from_millis(12), Duration::from_millis(30)],
            },
            Row {
                label: "etcd / <etcdctl & co>".into(),
                regent: false,
                samples: vec![Duration::from_millis(2100); 3],
            },
        ];
        let svg = strip_plot("crash", &rows);
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 5 + 2, "dots and legend");
        assert!(svg.contains("&lt;etcdctl &amp; co&gt;"));
        assert!(svg.contains(">10 ms<") && svg.contains(">10 s<"), "{svg}");
    }

    #[test]
    fn labels() {
        assert_eq!(tick_label(0.5), "0.5 ms");
        assert_eq!(tick_label(20.0), "20 ms");
        assert_eq!(tick_label(2000.0), "2 s");
        // No samples, or zero ones, still make a plot.
        assert!(strip_plot("x", &[]).contains("</svg>"));
        let zero = Row {
            label: "z".into(),
            regent: true,
            samples: vec![Duration::ZERO],
        };
        assert!(strip_plot("x", &[zero]).contains("<circle"));
    }
}
