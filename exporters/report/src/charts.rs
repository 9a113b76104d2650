//! The report's charts, drawn with plotters into SVG strings: lines over
//! time (with training phases shaded), heat maps (time x row) and bar
//! histograms. Only drawing here: what is shown comes in as numbers.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A chart that could not be drawn (plotters' error, as text).
#[derive(Debug, thiserror::Error)]
#[error("drawing the chart {chart:?}: {why}")]
pub struct ChartError {
    pub chart: String,
    pub why: String,
}

/// Series colours (Tableau 10: told apart in colour and in grey print).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// A shaded stretch of time: `[from, to)` in seconds from the start, its
/// label, and whether it is an epoch (alternate tints) or another phase.
#[derive(Clone, Debug)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub label: String,
    pub tint: usize,
}

const BAND_TINTS: [RGBColor; 3] = [RGBColor(222, 235, 247), RGBColor(198, 219, 239), RGBColor(253, 228, 200)];

/// One line: its name and (seconds, value) points.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn err(chart: &str) -> impl Fn(String) -> ChartError + '_ {
    move |why| ChartError { chart: chart.to_string(), why }
}

/// Makes the SVG scale with the page (plotters writes a fixed size).
fn responsive(svg: String) -> String {
    match svg.find("<svg") {
        Some(i) => {
            let tag_end = svg[i..].find('>').map_or(svg.len(), |e| i + e);
            let tag = &svg[i..tag_end];
            let fixed = tag
                .split_whitespace()
                .filter(|a| !a.starts_with("width=") && !a.starts_with("height="))
                .collect::<Vec<_>>()
                .join(" ");
            format!("{}{fixed} class=\"chart\" preserveAspectRatio=\"xMinYMin meet\"{}", &svg[..i], &svg[tag_end..])
        }
        None => svg,
    }
}

/// A nice upper bound for an axis holding values up to `max`.
fn headroom(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        1.0
    } else {
        max * 1.08
    }
}

/// Lines over time, with `bands` shaded behind them.
pub fn lines(
    title: &str,
    span: f64,
    lines: &[Line],
    bands: &[Band],
    y_fmt: &dyn Fn(f64) -> String,
    y_max: Option<f64>,
) -> Result<String, ChartError> {
    let e = err(title);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let top = y_max
            .unwrap_or_else(|| headroom(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0, f64::max)));
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .caption(title, ("sans-serif", 18))
            .x_label_area_size(34)
            .y_label_area_size(78)
            .build_cartesian_2d(0f64..span.max(1e-9), 0f64..top)
            .map_err(|x| e(x.to_string()))?;
        draw_bands(&mut chart, bands, top).map_err(&e)?;
        chart
            .configure_mesh()
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .x_desc("time from the start")
            .y_label_formatter(&|v| y_fmt(*v))
            .x_label_formatter(&|v| seconds(*v))
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()
            .map_err(|x| e(x.to_string()))?;
        // The legend is the page's (HTML, under the chart): it never
        // hides a line.
        for (k, l) in lines.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            // Few points (sparse samples over a long run): dots too, or
            // a lone sample would draw nothing.
            let dots = if l.points.len() <= 40 { 3 } else { 0 };
            chart
                .draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)).point_size(dots))
                .map_err(|x| e(x.to_string()))?;
        }
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(responsive(svg))
}

type Chart2d<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_bands(chart: &mut Chart2d<'_, '_>, bands: &[Band], top: f64) -> Result<(), String> {
    chart
        .draw_series(
            bands
                .iter()
                .map(|b| Rectangle::new([(b.from, 0.0), (b.to, top)], BAND_TINTS[b.tint % BAND_TINTS.len()].filled())),
        )
        .map_err(|x| x.to_string())?;
    // Labels where there is room: a band at least 1/25 of the chart wide.
    let span = chart.x_range().end - chart.x_range().start;
    let style = TextStyle::from(("sans-serif", 12)).color(&RGBColor(90, 90, 90));
    chart
        .draw_series(
            bands
                .iter()
                .filter(|b| (b.to - b.from) >= span / 25.0)
                .map(|b| Text::new(b.label.clone(), (b.from + span / 300.0, top * 0.97), style.clone())),
        )
        .map_err(|x| x.to_string())?;
    Ok(())
}

/// `0`, `4.5 ms`, `250 ms`, `2.5 s`, `90 s`, `12m30s`, `1h05m`.
pub fn seconds(v: f64) -> String {
    if v <= 0.0 {
        "0".into()
    } else if v < 0.1 {
        format!("{:.1} ms", v * 1e3)
    } else if v < 1.0 {
        format!("{:.0} ms", v * 1e3)
    } else if v < 10.0 {
        format!("{v:.1} s")
    } else if v < 120.0 {
        format!("{v:.0} s")
    } else if v < 3600.0 {
        format!("{}m{:02}s", (v / 60.0) as u64, (v % 60.0) as u64)
    } else {
        format!("{}h{:02}m", (v / 3600.0) as u64, (v / 60.0 % 60.0) as u64)
    }
}

/// A heat map: one row per name (the first at the top), one cell per
/// column of `width` seconds, darker for more (square root: small reads
/// stay visible beside the busiest cell).
pub fn heat(
    title: &str,
    span: f64,
    width: f64,
    rows: &[(String, Vec<f64>)],
    bands: &[Band],
) -> Result<String, ChartError> {
    let e = err(title);
    let n = rows.len().max(1) as i32;
    let max = rows.iter().flat_map(|r| r.1.iter().copied()).fold(0.0, f64::max);
    let mut svg = String::new();
    {
        let h = (70 + 26 * n as u32).max(170);
        let root = SVGBackend::with_string(&mut svg, (900, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        // One width for every heat map, so that their time axes line up.
        let label_w = 270;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .caption(title, ("sans-serif", 18))
            .x_label_area_size(30)
            .y_label_area_size(label_w)
            .build_cartesian_2d(0f64..span.max(1e-9), 0f64..f64::from(n))
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 13))
            .disable_mesh()
            .y_labels(0)
            .x_label_formatter(&|v| seconds(*v))
            .draw()
            .map_err(|x| e(x.to_string()))?;
        let cells = rows.iter().enumerate().flat_map(|(k, (_, vals))| {
            let r = n - 1 - k as i32;
            vals.iter().enumerate().filter(|(_, v)| **v > 0.0).map(move |(c, v)| {
                let x0 = c as f64 * width;
                let x1 = (x0 + width).min(span.max(x0 + width * 0.5));
                let shade = shade((v / max).sqrt());
                Rectangle::new([(x0, f64::from(r)), (x1, f64::from(r + 1))], shade.filled())
            })
        });
        chart.draw_series(cells).map_err(|x| e(x.to_string()))?;
        // Row k from the top spans [n-1-k, n-k): its name at its middle,
        // right-aligned against the axis (placed by hand: plotters picks
        // its own tick positions).
        let style = TextStyle::from(("sans-serif", 13)).pos(Pos::new(HPos::Right, VPos::Center)).color(&BLACK);
        for (k, (name, _)) in rows.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(0.0, f64::from(n - 1 - k as i32) + 0.5));
            root.draw(&Text::new(name.clone(), (x - 6, y), style.clone())).map_err(|x| e(x.to_string()))?;
        }
        // Phase starts as thin lines over the cells.
        let edge = RGBColor(214, 39, 40).mix(0.6);
        chart
            .draw_series(bands.iter().map(|b| PathElement::new(vec![(b.from, 0.0), (b.from, f64::from(n))], edge)))
            .map_err(|x| e(x.to_string()))?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(responsive(svg))
}

/// `#1f77b4`: series `k`'s colour, for the page's legend.
pub fn colour_hex(k: usize) -> String {
    let RGBColor(r, g, b) = PALETTE[k % PALETTE.len()];
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// White to dark blue, for 0..=1.
fn shade(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    RGBColor(mix(239.0, 8.0), mix(243.0, 48.0), mix(255.0, 107.0))
}

/// A bar histogram over labelled bins.
pub fn bars(title: &str, x_desc: &str, labels: &[String], counts: &[u64], colour: usize) -> Result<String, ChartError> {
    let values: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
    let bars = Bars { title, x_desc, y_desc: "calls", y_fmt: count, colour, highlight: None };
    bars.draw(labels, &values)
}

/// A bar chart: its captions, how its values read, its colour, and a bar
/// drawn in the next colour.
pub struct Bars<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub y_fmt: fn(f64) -> String,
    pub colour: usize,
    pub highlight: Option<usize>,
}

impl Bars<'_> {
    pub fn draw(&self, labels: &[String], values: &[f64]) -> Result<String, ChartError> {
        let e = err(self.title);
        let n = labels.len().max(1) as i32;
        let top = headroom(values.iter().copied().fold(0.0, f64::max));
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (440, 250)).into_drawing_area();
            root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
            let mut chart = ChartBuilder::on(&root)
                .margin(8)
                .caption(self.title, ("sans-serif", 16))
                .x_label_area_size(44)
                .y_label_area_size(58)
                .build_cartesian_2d((0..n).into_segmented(), 0f64..top)
                .map_err(|x| e(x.to_string()))?;
            // At most 8 bin labels, evenly spread.
            let every = labels.len().div_ceil(8).max(1) as i32;
            let fmt = self.y_fmt;
            chart
                .configure_mesh()
                .label_style(("sans-serif", 13))
                .axis_desc_style(("sans-serif", 13))
                .disable_x_mesh()
                .x_labels(labels.len())
                .x_desc(self.x_desc)
                .y_desc(self.y_desc)
                .y_labels(((top as usize) + 1).clamp(2, 10))
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) if i % every == 0 => labels.get(*i as usize).cloned().unwrap_or_default(),
                    _ => String::new(),
                })
                .y_label_formatter(&|v| fmt(*v))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()
                .map_err(|x| e(x.to_string()))?;
            // Bars drawn in bin order (plotters' Histogram series draws
            // them in a hash map's order: a different file every run).
            for (k, keep) in [(self.colour, false), (self.colour + 1, true)] {
                let c = PALETTE[k % PALETTE.len()];
                let shown = values.iter().enumerate().filter(|(i, _)| (self.highlight == Some(*i)) == keep);
                let bar = |(i, &v): (usize, &f64)| {
                    let i = i as i32;
                    let mut r =
                        Rectangle::new([(SegmentValue::Exact(i), v), (SegmentValue::Exact(i + 1), 0.0)], c.filled());
                    r.set_margin(0, 0, 1, 1);
                    r
                };
                chart.draw_series(shown.map(bar)).map_err(|x| e(x.to_string()))?;
            }
            root.present().map_err(|x| e(x.to_string()))?;
        }
        Ok(responsive(svg))
    }
}

/// A plain number with the digits its size needs: `0`, `0.025`, `1.5`, `12`.
pub fn number(v: f64) -> String {
    match v.abs() {
        0.0 => "0".into(),
        a if a < 0.01 => format!("{v:.4}"),
        a if a < 1.0 => format!("{v:.2}"),
        a if a < 10.0 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// `950`, `12k`, `3.4M`.
pub fn count(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.1}M", v / 1e6),
        v if v >= 1e4 => format!("{:.0}k", v / 1e3),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v if v == v.trunc() => format!("{v:.0}"),
        v => format!("{v:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_that_scales() {
        let l = Line { name: "worker".into(), points: vec![(0.0, 1.0), (1.0, 3.0)] };
        let b = Band { from: 0.2, to: 0.8, label: "EPOCH 1".into(), tint: 0 };
        let svg = lines("read", 1.0, &[l], &[b], &|v| format!("{v:.0}"), None).unwrap();
        assert!(svg.contains("<svg") && svg.contains("viewBox") && svg.contains("class=\"chart\""), "{svg}");
        let root = &svg[..svg.find('>').unwrap()];
        assert!(!root.contains("width=") && !root.contains("height="), "{root}");
        assert!(svg.contains("EPOCH 1"));
        assert_eq!(colour_hex(0), "#1f77b4");
        let h = heat("heat", 1.0, 0.5, &[("a.bin".into(), vec![0.0, 2.0])], &[]).unwrap();
        assert!(h.contains("a.bin") && h.contains("<rect"));
        let labels: Vec<String> = (0..3).map(|i| format!("{i} KiB")).collect();
        let s = bars("sizes", "bytes", &labels, &[1, 5, 0], 0).unwrap();
        assert!(s.contains("0 KiB") && s.contains("sizes"));
        assert_eq!(seconds(75.0), "75 s");
        assert_eq!(seconds(750.0), "12m30s");
        assert_eq!(
            (seconds(0.0), seconds(0.0045), seconds(0.25), seconds(2.5)),
            ("0".into(), "4.5 ms".into(), "250 ms".into(), "2.5 s".into())
        );
    }

    /// The same numbers draw the same file, bars in bin order (plotters'
    /// Histogram series iterated a hash map: each report differed).
    #[test]
    fn bars_draw_the_same_file_every_time() {
        let labels: Vec<String> = (0..24).map(|i| format!("{i} KiB")).collect();
        let counts: Vec<u64> = (0..24).map(|i| i * 7 % 11 + 1).collect();
        let first = bars("sizes", "bytes", &labels, &counts, 0).unwrap();
        for _ in 0..4 {
            assert_eq!(bars("sizes", "bytes", &labels, &counts, 0).unwrap(), first);
        }
        let xs: Vec<u32> = first
            .match_indices("<rect x=\"")
            .map(|(i, m)| &first[i + m.len()..])
            .filter_map(|r| r.split('"').next()?.parse().ok())
            .collect();
        assert!(xs.len() >= 24 && xs.windows(2).skip(xs.len() - 24).all(|w| w[0] < w[1]), "{xs:?}");
    }
}
