//! Charts (PNG and SVG, `plotters`): throughput relative to the baseline,
//! the per-second timelines and the latency percentiles. Text uses a font
//! bundled in a crate (no system font needed).

use crate::report::Report;
use crate::BenchError;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            epaint_default_fonts::UBUNTU_LIGHT,
        );
    });
}

fn color(i: usize, name: &str) -> RGBColor {
    match name {
        "rocksdb" => RGBColor(214, 69, 65),
        "leveldb" => RGBColor(90, 160, 70),
        "fjall" => RGBColor(200, 120, 30),
        "strata" => RGBColor(40, 110, 200),
        _ => {
            let p = [
                RGBColor(140, 80, 190),
                RGBColor(230, 150, 30),
                RGBColor(30, 170, 170),
                RGBColor(120, 120, 120),
            ];
            p[i % p.len()]
        }
    }
}

fn err<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> BenchError + '_ {
    move |e| BenchError::Chart(format!("{what}: {e}"))
}

/// Grouped bars: ops/s ÷ baseline per workload per engine.
fn throughput<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    r: &Report,
) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    let e = err::<DrawingAreaErrorKind<DB::ErrorType>>("throughput");
    root.fill(&WHITE).map_err(&e)?;
    let ws = r.workloads();
    let n = ws.len().max(1);
    let ymax = ws
        .iter()
        .flat_map(|w| r.engines.iter().filter_map(|en| r.ratio(&en.name, w)))
        .fold(1.0f64, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Throughput relative to {} (higher is better)", r.baseline),
            ("sans-serif", 24),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)
        .map_err(&e)?;
    let names = ws.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(format!("ops/s ÷ {}", r.baseline))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(&e)?;
    let k = r.engines.len().max(1) as f64;
    let width = 0.8 / k;
    for (j, en) in r.engines.iter().enumerate() {
        let c = color(j, &en.name);
        let bars: Vec<Rectangle<(f64, f64)>> = ws
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let v = r.ratio(&en.name, w)?;
                let x0 = i as f64 - 0.4 + j as f64 * width;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, v)],
                    c.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(&e)?
            .label(en.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .draw_series(LineSeries::new(
            vec![(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(&e)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(&e)?;
    root.present().map_err(&e)?;
    Ok(())
}

/// Mean (solid) and p99 (dashed) read latency across U1…U9, one line per
/// engine (the active-compaction paper's figure).
fn u_reads<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, r: &Report) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    let e = err::<DrawingAreaErrorKind<DB::ErrorType>>("u-reads");
    root.fill(&WHITE).map_err(&e)?;
    let us: Vec<(u32, String)> = r
        .workloads()
        .into_iter()
        .filter_map(|w| Some((w.strip_prefix('u')?.parse().ok()?, w)))
        .collect();
    // (engine index, name, [(U number, mean, p99)])
    type Series<'a> = (usize, &'a str, Vec<(f64, f64, f64)>);
    let series: Vec<Series<'_>> = r
        .engines
        .iter()
        .enumerate()
        .map(|(j, en)| {
            let pts = us
                .iter()
                .filter_map(|(i, w)| {
                    let l = r.cell(&en.name, w)?.median.read_latency.clone()?;
                    Some((f64::from(*i), l.mean_us.max(0.01), l.p99_us.max(0.01)))
                })
                .collect();
            (j, en.name.as_str(), pts)
        })
        .collect();
    let ymax = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.2))
        .fold(1.0f64, f64::max)
        * 1.5;
    let ymin = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(f64::MAX, f64::min)
        .min(1.0)
        * 0.8;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Read latency across U1…U9 (update share 10…90 %): mean solid, p99 dashed, µs (log)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.5f64..9.5, (ymin..ymax).log_scale())
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_labels(9)
        .x_label_formatter(&|x| format!("U{}", x.round()))
        .y_desc("µs")
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(&e)?;
    for (j, name, pts) in series {
        let c = color(j, name);
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                c.stroke_width(2),
            ))
            .map_err(&e)?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], c.stroke_width(2)));
        chart
            .draw_series(DashedLineSeries::new(
                pts.iter().map(|p| (p.0, p.2)),
                6,
                4,
                c.stroke_width(1),
            ))
            .map_err(&e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(&e)?;
    root.present().map_err(&e)?;
    Ok(())
}

fn panels(n: usize) -> (usize, usize) {
    let cols = if n <= 1 {
        1
    } else if n <= 4 {
        2
    } else {
        3
    };
    (n.div_ceil(cols).max(1), cols)
}

/// One engine's line: its colour index, name and (x, y) points.
type Series<'a> = (usize, &'a str, Vec<(f64, f64)>);

/// One panel per workload: ops per second over time, one line per engine
/// (per tenth of a second for short runs).
fn timeline<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, r: &Report) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    let e = err::<DrawingAreaErrorKind<DB::ErrorType>>("timeline");
    root.fill(&WHITE).map_err(&e)?;
    let root = root
        .titled(
            "Operations per second over time (median repeat)",
            ("sans-serif", 24),
        )
        .map_err(&e)?;
    let ws = r.workloads();
    let (rows, cols) = panels(ws.len());
    for (w, area) in ws.iter().zip(root.split_evenly((rows, cols))) {
        // Runs shorter than FINE_BELOW seconds are drawn from their tenths
        // of a second (as ops/s), so a run of one to three seconds still
        // draws a line.
        const FINE_BELOW: f64 = 20.0;
        let longest = r
            .engines
            .iter()
            .filter_map(|en| r.cell(&en.name, w))
            .map(|c| c.median.secs)
            .fold(0.0, f64::max);
        let fine = longest < FINE_BELOW;
        let series: Vec<Series<'_>> = r
            .engines
            .iter()
            .enumerate()
            .filter_map(|(j, en)| {
                let m = r.cell(&en.name, w)?.median;
                let points: Vec<(f64, f64)> = if fine && !m.timeline_fine.is_empty() {
                    m.timeline_fine
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (i as f64 / 10.0 + 0.05, *v as f64 * 10.0))
                        .collect()
                } else {
                    m.timeline
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (i as f64 + 0.5, *v as f64))
                        .collect()
                };
                Some((j, en.name.as_str(), points))
            })
            .collect();
        let xmax = series
            .iter()
            .flat_map(|s| s.2.last().map(|p| p.0 + 0.5))
            .fold(1.0, f64::max);
        let ymax = series
            .iter()
            .flat_map(|s| s.2.iter().map(|p| p.1))
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(&area)
            .caption(w.as_str(), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(&e)?;
        chart
            .configure_mesh()
            .x_desc("s")
            .label_style(("sans-serif", 11))
            .y_label_formatter(&|v| {
                if ymax >= 10_000.0 {
                    format!("{:.0}k", v / 1000.0)
                } else {
                    format!("{v:.0}")
                }
            })
            .draw()
            .map_err(&e)?;
        for (j, name, points) in series {
            let c = color(j, name);
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))
                .map_err(&e)?
                .label(name.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 12, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(&e)?;
    }
    root.present().map_err(&e)?;
    Ok(())
}

/// One panel per workload: p50 / p99 / p99.9 / max on a log scale.
fn latency<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, r: &Report) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    let e = err::<DrawingAreaErrorKind<DB::ErrorType>>("latency");
    root.fill(&WHITE).map_err(&e)?;
    let root = root
        .titled(
            "Latency percentiles, microseconds (log scale; lower is better)",
            ("sans-serif", 24),
        )
        .map_err(&e)?;
    let ws = r.workloads();
    let (rows, cols) = panels(ws.len());
    const LABELS: [&str; 4] = ["p50", "p99", "p99.9", "max"];
    for (w, area) in ws.iter().zip(root.split_evenly((rows, cols))) {
        let series: Vec<(usize, &str, [f64; 4])> = r
            .engines
            .iter()
            .enumerate()
            .filter_map(|(j, en)| {
                let l = &r.cell(&en.name, w)?.median.latency;
                Some((
                    j,
                    en.name.as_str(),
                    [l.p50_us, l.p99_us, l.p999_us, l.max_us].map(|v| v.max(0.01)),
                ))
            })
            .collect();
        let ymin = series
            .iter()
            .flat_map(|s| s.2)
            .fold(f64::MAX, f64::min)
            .min(1.0)
            * 0.8;
        let ymax = series.iter().flat_map(|s| s.2).fold(1.0f64, f64::max) * 1.5;
        let mut chart = ChartBuilder::on(&area)
            .caption(w.as_str(), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(48)
            .build_cartesian_2d(-0.3f64..3.3, (ymin..ymax).log_scale())
            .map_err(&e)?;
        chart
            .configure_mesh()
            .x_labels(4)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && (0.0..4.0).contains(&i) {
                    LABELS[i as usize].to_string()
                } else {
                    String::new()
                }
            })
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(&e)?;
        for (j, name, v) in series {
            let c = color(j, name);
            let pts: Vec<(f64, f64)> = v.iter().enumerate().map(|(i, y)| (i as f64, *y)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(&e)?
                .label(name.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 12, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(&e)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(&e)?;
    }
    root.present().map_err(&e)?;
    Ok(())
}

type Draw = fn(&Report, &Path, (u32, u32)) -> Result<(), BenchError>;

fn both(
    out: &Path,
    name: &str,
    size: (u32, u32),
    r: &Report,
    png: Draw,
    svg: Draw,
) -> Result<(), BenchError> {
    png(r, &out.join(format!("{name}.png")), size)?;
    svg(r, &out.join(format!("{name}.svg")), size)
}

/// Writes throughput, timeline and latency charts; returns their base names.
pub fn write_all(r: &Report, out: &Path) -> Result<Vec<String>, BenchError> {
    register_font();
    if r.workloads().is_empty() {
        return Ok(Vec::new());
    }
    let n = r.workloads().len();
    let (rows, cols) = panels(n);
    let grid = (380 * cols as u32, 60 + 280 * rows as u32);
    let wide = ((110 * n as u32).clamp(700, 2200), 480);
    both(
        out,
        "throughput",
        wide,
        r,
        |r, p, s| throughput(BitMapBackend::new(p, s).into_drawing_area(), r),
        |r, p, s| throughput(SVGBackend::new(p, s).into_drawing_area(), r),
    )?;
    both(
        out,
        "timeline",
        grid,
        r,
        |r, p, s| timeline(BitMapBackend::new(p, s).into_drawing_area(), r),
        |r, p, s| timeline(SVGBackend::new(p, s).into_drawing_area(), r),
    )?;
    both(
        out,
        "latency",
        grid,
        r,
        |r, p, s| latency(BitMapBackend::new(p, s).into_drawing_area(), r),
        |r, p, s| latency(SVGBackend::new(p, s).into_drawing_area(), r),
    )?;
    let mut names = vec![
        "throughput".to_string(),
        "timeline".to_string(),
        "latency".to_string(),
    ];
    if r.workloads().iter().any(|w| w.starts_with('u')) {
        both(
            out,
            "u-reads",
            (900, 520),
            r,
            |r, p, s| u_reads(BitMapBackend::new(p, s).into_drawing_area(), r),
            |r, p, s| u_reads(SVGBackend::new(p, s).into_drawing_area(), r),
        )?;
        names.push("u-reads".to_string());
    }
    Ok(names)
}
