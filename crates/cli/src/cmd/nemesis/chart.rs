//! The nemesis's chart (PNG): operations answered ok and refused per second of the run, with each
//! fault's window shaded in its kind's colour.

use super::faults::{Fault, FaultKind};
use crate::cmd::charts::{draw_err, legend, register_font, ChartError};
use plotters::prelude::*;
use std::path::Path;

const WIDTH_PX: u32 = 1400;
const HEIGHT_PX: u32 = 600;

/// What the chart shows.
pub struct Series<'a> {
    pub title: String,
    /// Operations answered ok, per second of the run.
    pub ok: &'a [usize],
    /// Operations refused or whose outcome is unknown, per second.
    pub not_ok: &'a [usize],
    pub windows: &'a [Fault],
}

fn color_of(kind: FaultKind) -> RGBColor {
    match kind {
        FaultKind::Kill => RGBColor(214, 39, 40),
        FaultKind::Pause => RGBColor(255, 127, 14),
        FaultKind::Isolate => RGBColor(148, 103, 189),
        FaultKind::Partition => RGBColor(31, 119, 180),
        FaultKind::Loss => RGBColor(44, 160, 44),
        FaultKind::Disk => RGBColor(140, 86, 75),
    }
}

pub fn draw(s: &Series, file: &Path) -> Result<(), ChartError> {
    register_font()?;
    let root = BitMapBackend::new(file, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let root = root.titled(&s.title, ("sans-serif", 22)).map_err(draw_err)?;
    let seconds = s.ok.len().max(1) as f64;
    let y_max = s.ok.iter().chain(s.not_ok).copied().max().unwrap_or(1).max(1) as f64 * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..seconds, 0f64..y_max)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("second of the run")
        .y_desc("operations per second")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(draw_err)?;
    let mut kinds: Vec<FaultKind> = s.windows.iter().map(|w| w.kind).collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let color = color_of(kind);
        let shade = |w: &Fault| {
            let (from, to) = (w.start_ms as f64 / 1e3, w.end_ms as f64 / 1e3);
            Rectangle::new([(from, 0.0), (to, y_max)], color.mix(0.18).filled())
        };
        chart
            .draw_series(s.windows.iter().filter(|w| w.kind == kind).map(shade))
            .map_err(draw_err)?
            .label(kind.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], color.mix(0.4).filled()));
    }
    // Each second's count drawn at its middle.
    let line = |counts: &[usize]| -> Vec<(f64, f64)> {
        counts.iter().enumerate().map(|(i, n)| (i as f64 + 0.5, *n as f64)).collect()
    };
    for (counts, label, color) in [(s.ok, "answered ok", BLACK), (s.not_ok, "refused or unknown", RED)] {
        chart
            .draw_series(LineSeries::new(line(counts), color.stroke_width(2)))
            .map_err(draw_err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(draw_err)
}
