//! The nemesis's chart (PNG): operations answered ok and refused per second of the run, and
//! under them a strip with a lane per kind of fault holding each of its windows, in the charts'
//! one style (`cmd::charts`).

use super::faults::{Fault, FaultKind, ALL};
use crate::cmd::charts::band::median_band;
use crate::cmd::charts::legend::{Entry, Legend, Swatch};
use crate::cmd::charts::panel::{self, Lane, Mark, Panel};
use crate::cmd::charts::{draw_png, style, ChartError, Figure};
use plotters::style::RGBColor;
use std::path::Path;

const WIDTH_PX: u32 = 1400;
const HEIGHT_PX: u32 = 640;
/// The two lines take the palette's first colours, the kinds of fault the next.
const LINES: usize = 2;

/// What the chart shows.
pub struct Series<'a> {
    pub title: String,
    /// Operations answered ok, per second of the run.
    pub ok: &'a [usize],
    /// Operations refused or whose outcome is unknown, per second.
    pub not_ok: &'a [usize],
    pub windows: &'a [Fault],
}

/// A kind keeps its colour whichever kinds a run injects.
fn color_of(kind: FaultKind) -> Result<RGBColor, ChartError> {
    let index = ALL.iter().position(|k| *k == kind).unwrap_or(ALL.len());
    style::color(LINES + index)
}

fn line(counts: &[usize], color: RGBColor) -> panel::Series {
    panel::Series { color, points: median_band(&[counts.iter().map(|n| *n as f64).collect()]) }
}

pub fn figure(s: &Series) -> Result<Figure, ChartError> {
    let (ok, not_ok) = (style::color(0)?, style::color(1)?);
    let series = vec![line(s.ok, ok), line(s.not_ok, not_ok)];
    let mut kinds: Vec<FaultKind> = s.windows.iter().map(|w| w.kind).collect();
    kinds.sort();
    kinds.dedup();
    let mut lanes = vec![];
    let mut entries = vec![
        Entry { label: "answered ok".into(), color: ok, swatch: Swatch::Line },
        Entry { label: "refused or unknown".into(), color: not_ok, swatch: Swatch::Line },
    ];
    for kind in kinds {
        let color = color_of(kind)?;
        let marks = s.windows.iter().filter(|w| w.kind == kind);
        let span = |w: &Fault| Mark { from: w.start_ms as f64 / 1e3, to: w.end_ms as f64 / 1e3 };
        lanes.push(Lane { label: kind.name().into(), color, marks: marks.map(span).collect() });
        entries.push(Entry { label: kind.name().into(), color, swatch: Swatch::Block });
    }
    let notes =
        if lanes.is_empty() { vec![] } else { vec!["strip under the panel:".into(), "each fault's window".into()] };
    let panel = Panel {
        caption: None,
        x_desc: "second of the run".into(),
        y_desc: "operations per second".into(),
        x_max: s.ok.len().max(s.not_ok.len()).max(1) as f64,
        y: panel::y_from_zero(&series),
        series,
        lanes,
    };
    Ok(Figure {
        title: s.title.clone(),
        width: WIDTH_PX,
        height: HEIGHT_PX,
        panels: vec![panel],
        legend: Legend { entries, notes },
    })
}

pub fn draw(s: &Series, file: &Path) -> Result<(), ChartError> {
    draw_png(&figure(s)?, file).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::super::faults::Detail;
    use super::*;

    fn fault(kind: FaultKind, start_ms: u64, end_ms: u64) -> Fault {
        Fault { kind, host: 1, detail: Detail::None, start_ms, end_ms }
    }

    #[test]
    fn each_kind_injected_is_a_lane_of_its_windows_under_the_panel() {
        let windows = [
            fault(FaultKind::Pause, 2_000, 3_500),
            fault(FaultKind::Kill, 500, 1_000),
            fault(FaultKind::Pause, 6_000, 7_000),
        ];
        let (ok, not_ok) = ([100, 90, 0, 10, 100, 100, 100, 100], [0, 5, 40, 20, 0, 0, 0, 0]);
        let s = Series { title: "t".into(), ok: &ok, not_ok: &not_ok, windows: &windows };
        let f = figure(&s).expect("a figure");
        let p = &f.panels[0];
        assert_eq!((p.series.len(), p.x_max, p.y.start), (2, 8.0, 0.0));
        assert_eq!(p.lanes.iter().map(|l| l.label.as_str()).collect::<Vec<_>>(), ["kill", "pause"]);
        assert_eq!(p.lanes[1].marks, [Mark { from: 2.0, to: 3.5 }, Mark { from: 6.0, to: 7.0 }]);
        assert_eq!(f.legend.entries.len(), 4);
        let dir = tempfile::tempdir().expect("a temporary directory");
        draw(&s, &dir.path().join("chart.png")).expect("drawn");
        let bytes = std::fs::read(dir.path().join("chart.png")).expect("the PNG");
        assert_eq!(crate::cmd::charts::png_size(&bytes), Some((WIDTH_PX, HEIGHT_PX)));
    }

    #[test]
    fn every_kind_of_fault_has_a_colour_of_its_own_distinct_from_the_lines() {
        let mut colors = vec![style::color(0).expect("ok"), style::color(1).expect("not ok")];
        for kind in ALL {
            let c = color_of(kind).expect("a colour for every kind");
            assert!(!colors.contains(&c), "{} shares a colour", kind.name());
            colors.push(c);
        }
    }
}
