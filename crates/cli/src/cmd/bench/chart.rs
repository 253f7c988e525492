//! The chart of an invocation (PNG): committed operations per second (top) and the p99 commit
//! latency of each second (bottom), one series per cut interval (no cuts, each `--cut-every`):
//! the median of its rounds in a band of their min–max (`--rounds`; one round is a plain line);
//! each interval's cuts, of every round, as ticks in a strip under the bottom panel.

use super::report::{every_text, Report};
use super::stats::{RunStats, SecondStats};
use crate::cmd::charts::band::median_band;
use crate::cmd::charts::legend::{Entry, Legend, Swatch};
use crate::cmd::charts::panel::{self, Lane, Mark, Panel, Series};
use crate::cmd::charts::{draw_png, style, ChartError, Figure};
use std::path::Path;

const WIDTH_PX: u32 = 1200;
const HEIGHT_PX: u32 = 860;
const X_DESC: &str = "second of the run";

/// The runs of one cut interval, one a round.
struct Group<'a> {
    cut_every_ms: Option<f64>,
    runs: Vec<&'a RunStats>,
}

impl Group<'_> {
    fn label(&self) -> String {
        match self.cut_every_ms {
            Some(ms) => format!("a cut every {}", every_text(ms)),
            None => "no cuts".into(),
        }
    }

    /// Each round's `value` per second, summed up.
    fn series(&self, color: plotters::style::RGBColor, value: impl Fn(&SecondStats) -> f64) -> Series {
        let rounds: Vec<Vec<f64>> = self.runs.iter().map(|r| r.per_second.iter().map(&value).collect()).collect();
        Series { color, points: median_band(&rounds) }
    }
}

/// The runs by cut interval, in the order the invocation ran them first.
fn groups(runs: &[RunStats]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = vec![];
    for run in runs {
        match groups.iter_mut().find(|g| g.cut_every_ms == run.cut_every_ms) {
            Some(g) => g.runs.push(run),
            None => groups.push(Group { cut_every_ms: run.cut_every_ms, runs: vec![run] }),
        }
    }
    groups
}

pub fn figure(report: &Report) -> Result<Figure, ChartError> {
    let groups = groups(&report.runs);
    let colors = (0..groups.len()).map(style::color).collect::<Result<Vec<_>, _>>()?;
    let rounds = report.runs.iter().map(|r| r.round).max().unwrap_or(1);
    let seconds = report.runs.iter().map(|r| r.per_second.len()).max().unwrap_or(1) as f64;
    let committed: Vec<Series> =
        groups.iter().zip(&colors).map(|(g, c)| g.series(*c, |s| s.committed as f64)).collect();
    let p99: Vec<Series> = groups.iter().zip(&colors).map(|(g, c)| g.series(*c, |s| s.p99_ms)).collect();
    let lanes: Vec<Lane> = groups
        .iter()
        .zip(&colors)
        .filter_map(|(g, c)| {
            let label = every_text(g.cut_every_ms?);
            let marks = g.runs.iter().flat_map(|r| r.cuts.list.iter().map(|c| Mark { from: c.at_s, to: c.at_s }));
            Some(Lane { label, color: *c, marks: marks.collect() })
        })
        .collect();
    let top = Panel {
        caption: None,
        x_desc: X_DESC.into(),
        y_desc: "committed per second".into(),
        x_max: seconds,
        y: panel::y_around(&committed),
        series: committed,
        lanes: vec![],
    };
    let bottom = Panel {
        caption: None,
        x_desc: X_DESC.into(),
        y_desc: "p99 commit latency (ms)".into(),
        x_max: seconds,
        y: panel::y_from_zero(&p99),
        series: p99,
        lanes,
    };
    let swatch = if rounds > 1 { Swatch::Band } else { Swatch::Line };
    let entries = groups.iter().zip(&colors).map(|(g, c)| Entry { label: g.label(), color: *c, swatch }).collect();
    let mut notes = vec![];
    if rounds > 1 {
        notes.extend([format!("line: the median of {rounds} rounds"), "band: their min–max".into()]);
    }
    if groups.iter().any(|g| g.cut_every_ms.is_some()) {
        notes.extend(["strip under the lower panel:".into(), "each cut of each round".into()]);
    }
    let s = &report.setup;
    let replicas = s.replicas.map(|r| format!(" (R={r})")).unwrap_or_default();
    Ok(Figure {
        title: format!(
            "waymark bench: {}, {} clients, {} hosts{replicas}, {} s a run",
            format!("{:?}", s.workload).to_lowercase(),
            s.clients,
            s.hosts,
            s.seconds
        ),
        width: WIDTH_PX,
        height: HEIGHT_PX,
        panels: vec![top, bottom],
        legend: Legend { entries, notes },
    })
}

pub fn draw(report: &Report, file: &Path) -> Result<(), ChartError> {
    draw_png(&figure(report)?, file).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::super::report::Setup;
    use super::super::stats::{Cut, Outcome, Recorder};
    use super::super::workload::Kind;
    use super::*;
    use std::time::{Duration, Instant};

    /// A run of `seconds` with `per_second` commits each second (1 ms each) and a cut a second.
    fn run(round: u32, cut_every_ms: Option<u64>, per_second: u64, seconds: u64) -> RunStats {
        let rec = Recorder::new(seconds);
        let from = Instant::now();
        rec.start_at(from);
        for s in 0..seconds {
            for i in 0..per_second {
                let at = from + Duration::from_millis(s * 1000 + i % 1000);
                rec.record(at, Duration::from_millis(1), Outcome::Committed { ops: 1, retries: 0 });
            }
        }
        let cut = |at_s: f64| Cut { at_s, latency_ms: 5.0, cut: None, ok: true, phases_ms: vec![], error: None };
        let cuts = match cut_every_ms {
            Some(_) => (0..seconds).map(|s| cut(s as f64)).collect(),
            None => vec![],
        };
        let mut r = rec.summary("r".into(), cut_every_ms.map(Duration::from_millis), cuts);
        r.round = round;
        r
    }

    /// Three rounds of no cuts, cuts every 1 s and every 100 ms: the issue's nine runs.
    fn report() -> Report {
        let setup = Setup {
            workload: Kind::Bank,
            clients: 8,
            pipeline: 1,
            hosts: 3,
            system: "redis-protocol",
            after_write: None,
            replicas: Some(2),
            seconds: 4,
            warmup_s: 1.0,
            machine_cores: 2,
        };
        let mut runs = vec![];
        for round in 1..=3 {
            for every in [None, Some(1000), Some(100)] {
                runs.push(run(round, every, 100 * round as u64, if round == 2 { 3 } else { 4 }));
            }
        }
        Report::new(setup, runs)
    }

    #[test]
    fn nine_runs_are_three_series_over_their_rounds_with_the_cuts_under_the_lower_panel() {
        let f = figure(&report()).expect("a figure");
        assert_eq!(f.panels.len(), 2);
        for p in &f.panels {
            assert_eq!(p.series.len(), 3, "one series per interval, not per run");
        }
        // Rounds of 100, 200, 300 commits a second; the third second has rounds 1 and 3 only.
        let committed = &f.panels[0].series[0].points;
        assert_eq!(committed.len(), 4);
        assert_eq!((committed[0].low, committed[0].median, committed[0].high), (100.0, 200.0, 300.0));
        assert_eq!((committed[3].median, committed[3].rounds), (200.0, 2));
        assert!(f.panels[0].lanes.is_empty());
        let lanes = &f.panels[1].lanes;
        assert_eq!(lanes.iter().map(|l| l.label.as_str()).collect::<Vec<_>>(), ["1s", "100ms"]);
        assert_eq!(lanes[0].marks.len(), 4 + 3 + 4, "every round's cuts");
        let labels: Vec<&str> = f.legend.entries.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["no cuts", "a cut every 1s", "a cut every 100ms"]);
        assert!(f.legend.entries.iter().all(|e| e.swatch == Swatch::Band));
        assert!(f.title.contains("bank") && f.title.contains("R=2"), "{}", f.title);
    }

    #[test]
    fn the_chart_is_a_png_of_its_size() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("bench.png");
        draw(&report(), &file).expect("drawn");
        let bytes = std::fs::read(&file).expect("the PNG");
        assert_eq!(crate::cmd::charts::png_size(&bytes), Some((WIDTH_PX, HEIGHT_PX)));
    }
}
