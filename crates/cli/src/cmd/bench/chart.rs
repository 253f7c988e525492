//! The chart of an invocation (PNG): committed operations per second (top) and the p99 commit
//! latency of each second (bottom), one line per run, each run's cuts marked as thin vertical
//! lines in its colour. Text is drawn with DejaVu Sans embedded in the binary: no system fonts.

use super::report::Report;
use crate::cmd::charts::{draw_err, legend, register_font, ChartError};
use plotters::prelude::*;
use std::path::Path;

const WIDTH_PX: u32 = 1200;
const HEIGHT_PX: u32 = 800;
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

pub fn draw(report: &Report, file: &Path) -> Result<(), ChartError> {
    register_font()?;
    let root = BitMapBackend::new(file, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let s = &report.setup;
    let title = format!("waymark bench: {:?}, {} clients, {} hosts", s.workload, s.clients, s.hosts);
    let root = root.titled(&title, ("sans-serif", 24)).map_err(draw_err)?;
    let (top, bottom) = root.split_vertically(HEIGHT_PX / 2 - 20);
    let seconds = report.runs.iter().map(|r| r.per_second.len()).max().unwrap_or(1).max(1) as f64;
    let top_max = report.runs.iter().flat_map(|r| r.per_second.iter().map(|s| s.committed)).max().unwrap_or(1);
    let p99_max = report.runs.iter().flat_map(|r| r.per_second.iter().map(|s| s.p99_ms)).fold(1.0, f64::max);
    panel(&top, report, seconds, top_max as f64 * 1.15, "committed per second", |s| s.committed as f64)?;
    panel(&bottom, report, seconds, p99_max * 1.15, "p99 commit latency (ms)", |s| s.p99_ms)?;
    root.present().map_err(draw_err)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    report: &Report,
    seconds: f64,
    y_max: f64,
    y_desc: &str,
    value: impl Fn(&super::stats::SecondStats) -> f64,
) -> Result<(), ChartError> {
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..seconds, 0f64..y_max.max(1.0))
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("second of the run")
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(draw_err)?;
    for (i, run) in report.runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        for cut in &run.cuts.list {
            let line = vec![(cut.at_s, 0.0), (cut.at_s, y_max * 0.12)];
            chart.draw_series(LineSeries::new(line, color.mix(0.7).stroke_width(2))).map_err(draw_err)?;
        }
        // Each second's value drawn at its middle.
        let points = run.per_second.iter().map(|s| (s.second as f64 + 0.5, value(s)));
        let label = match run.cut_every_ms {
            Some(_) => format!("{} (each cut a tick at the bottom)", run.label),
            None => run.label.clone(),
        };
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(draw_err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}
