//! `waymark bench chart`: the chart of `bench/strategies.sh`'s JSON. One panel per cut interval,
//! longest first; in each, every strategy's committed transfers per second as the median of its
//! rounds in a band of their min–max, the run without cuts beside them as the reference; under
//! each panel a strip with a lane per strategy holding the ticks of its cuts (every round's).

use crate::cmd::charts::band::median_band;
use crate::cmd::charts::legend::{Entry, Legend, Swatch};
use crate::cmd::charts::panel::{self, Lane, Mark, Panel, Series};
use crate::cmd::charts::{draw_png, style, ChartError, Figure};
use plotters::style::RGBColor;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

const WIDTH_PX: u32 = 1200;
const HEIGHT_PX: u32 = 900;
/// The script's order, so that a strategy keeps its colour from one chart to the next.
const KNOWN: [&str; 3] = ["consistent", "blocking", "versions"];
/// The `cut_every` of the reference runs.
const NO_CUTS: &str = "none";

/// What the chart reads of `OUT_DIR/strategies.json`.
#[derive(Debug, Deserialize)]
pub struct Strategies {
    pub date: String,
    pub clients: u64,
    pub seconds: u64,
    pub rounds: u64,
    pub runs: Vec<Run>,
}

/// One run of `waymark bench` the script made.
#[derive(Debug, Deserialize)]
pub struct Run {
    pub strategy: String,
    /// `1s`, `100ms`, or `none` for the reference.
    pub cut_every: String,
    /// Committed transfers in each second of the run.
    pub per_second: Vec<f64>,
    /// When each cut was asked, in seconds of the run (absent from JSON written before the
    /// chart was: then no strip).
    #[serde(default)]
    pub cut_at_s: Vec<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum StrategiesError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not the JSON of bench/strategies.sh: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{path} holds no run with cuts")]
    NoRuns { path: PathBuf },
    #[error("cut interval {0:?} of a run is not a duration")]
    Interval(String),
    #[error(transparent)]
    Chart(#[from] ChartError),
}

pub fn read(path: &Path) -> Result<Strategies, StrategiesError> {
    let text = std::fs::read(path).map_err(|source| StrategiesError::Read { path: path.into(), source })?;
    serde_json::from_slice(&text).map_err(|source| StrategiesError::Parse { path: path.into(), source })
}

/// Draws the chart of the JSON at `from` into `out`.
pub fn draw(from: &Path, out: &Path) -> Result<(), StrategiesError> {
    let strategies = read(from)?;
    let figure = figure(&strategies)?.ok_or_else(|| StrategiesError::NoRuns { path: from.into() })?;
    draw_png(&figure, out)?;
    Ok(())
}

/// A strategy run with cuts, and its colour in every panel.
struct Strategy {
    name: String,
    color: RGBColor,
}

/// A cut interval as the script writes it (`1s`), and its length.
struct Interval {
    text: String,
    length: Duration,
}

/// The figure of `s`; `None` without a run with cuts.
pub fn figure(s: &Strategies) -> Result<Option<Figure>, StrategiesError> {
    let intervals = intervals(&s.runs)?;
    if intervals.is_empty() {
        return Ok(None);
    }
    let strategies = names(&s.runs)
        .into_iter()
        .enumerate()
        .map(|(i, name)| Ok(Strategy { name, color: style::color(i)? }))
        .collect::<Result<Vec<_>, ChartError>>()?;
    let reference: Vec<&Run> = s.runs.iter().filter(|r| r.cut_every == NO_CUTS).collect();
    let mut panels: Vec<Panel> = intervals.iter().map(|every| panel_of(s, every, &strategies, &reference)).collect();
    // One scale for every panel, so that the panels compare by eye.
    let y = panel::y_around(panels.iter().flat_map(|p| &p.series));
    panels.iter_mut().for_each(|p| p.y = y.clone());
    let ticks = s.runs.iter().any(|r| !r.cut_at_s.is_empty());
    Ok(Some(Figure {
        title: format!(
            "Cut strategies ({}): bank, 3 hosts R=2, {} clients, {} s a run, {} rounds",
            s.date, s.clients, s.seconds, s.rounds
        ),
        width: WIDTH_PX,
        height: HEIGHT_PX,
        panels,
        legend: legend(&strategies, !reference.is_empty(), ticks),
    }))
}

/// The panel of one interval: the reference, then each strategy; a lane of cuts per strategy.
/// Its y axis is set by the figure, for all panels at once.
fn panel_of(s: &Strategies, every: &Interval, strategies: &[Strategy], reference: &[&Run]) -> Panel {
    let runs_of = |name: &str| -> Vec<&Run> {
        s.runs.iter().filter(|r| r.strategy == name && r.cut_every == every.text).collect()
    };
    let each: Vec<(&Strategy, Vec<&Run>)> = strategies.iter().map(|st| (st, runs_of(&st.name))).collect();
    let reference = (!reference.is_empty()).then(|| series_of(reference, style::REFERENCE));
    let series = reference.into_iter().chain(each.iter().map(|(st, runs)| series_of(runs, st.color)));
    let rounds = each.iter().map(|(_, runs)| runs.len()).max().unwrap_or(0);
    Panel {
        caption: Some(format!("a cut every {} ({rounds} rounds)", every.text)),
        x_desc: "second of the run".into(),
        y_desc: "committed transfers per second".into(),
        x_max: s.runs.iter().map(|r| r.per_second.len()).max().unwrap_or(1) as f64,
        y: 0.0..1.0,
        series: series.collect(),
        lanes: each.iter().filter_map(|(st, runs)| lane_of(runs, st)).collect(),
    }
}

/// The cut intervals of `runs`, longest first.
fn intervals(runs: &[Run]) -> Result<Vec<Interval>, StrategiesError> {
    let mut found: Vec<Interval> = vec![];
    for r in runs.iter().filter(|r| r.cut_every != NO_CUTS) {
        if !found.iter().any(|i| i.text == r.cut_every) {
            let length =
                humantime::parse_duration(&r.cut_every).map_err(|_| StrategiesError::Interval(r.cut_every.clone()))?;
            found.push(Interval { text: r.cut_every.clone(), length });
        }
    }
    found.sort_by_key(|i| std::cmp::Reverse(i.length));
    Ok(found)
}

/// The strategies run with cuts: the known ones in their order, then any other by name.
fn names(runs: &[Run]) -> Vec<String> {
    let with_cuts = || runs.iter().filter(|r| r.cut_every != NO_CUTS).map(|r| r.strategy.as_str());
    let mut names: Vec<String> =
        KNOWN.iter().filter(|k| with_cuts().any(|s| s == **k)).map(|k| k.to_string()).collect();
    let mut others: Vec<String> = with_cuts().filter(|s| !KNOWN.contains(s)).map(String::from).collect();
    others.sort();
    others.dedup();
    names.extend(others);
    names
}

fn series_of(runs: &[&Run], color: RGBColor) -> Series {
    let rounds: Vec<Vec<f64>> = runs.iter().map(|r| r.per_second.clone()).collect();
    Series { color, points: median_band(&rounds) }
}

fn lane_of(runs: &[&Run], strategy: &Strategy) -> Option<Lane> {
    let marks: Vec<Mark> = runs.iter().flat_map(|r| r.cut_at_s.iter().map(|at| Mark { from: *at, to: *at })).collect();
    (!marks.is_empty()).then(|| Lane { label: strategy.name.clone(), color: strategy.color, marks })
}

fn legend(strategies: &[Strategy], reference: bool, ticks: bool) -> Legend {
    let entry = |label: String, color: RGBColor| Entry { label, color, swatch: Swatch::Band };
    let mut entries: Vec<Entry> = strategies.iter().map(|st| entry(st.name.clone(), st.color)).collect();
    if reference {
        entries.push(entry("no cuts (reference)".into(), style::REFERENCE));
    }
    let mut notes = vec!["line: the median of the rounds".to_string(), "band: their min–max".into()];
    if ticks {
        notes.extend(["strip under each panel:".into(), "each cut of each round".into()]);
    }
    Legend { entries, notes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(strategy: &str, cut_every: &str, per_second: &[f64]) -> Run {
        let cut_at_s = if cut_every == NO_CUTS { vec![] } else { vec![0.0, 1.0] };
        Run { strategy: strategy.into(), cut_every: cut_every.into(), per_second: per_second.to_vec(), cut_at_s }
    }

    fn strategies_json(runs: Vec<Run>) -> Strategies {
        Strategies { date: "2026-12-07T12:00:00Z".into(), clients: 8, seconds: 3, rounds: 3, runs }
    }

    /// Three rounds of every strategy at two intervals, and the reference.
    fn three_rounds() -> Strategies {
        let mut runs = vec![];
        for round in 1..=3u32 {
            let k = round as f64;
            runs.push(run("consistent", NO_CUTS, &[100.0 * k, 100.0, 100.0]));
            for every in ["100ms", "1s"] {
                for (i, s) in ["versions", "blocking", "consistent"].iter().enumerate() {
                    runs.push(run(s, every, &[10.0 * k + i as f64, 20.0, 30.0]));
                }
            }
        }
        strategies_json(runs)
    }

    #[test]
    fn one_panel_per_interval_longest_first_one_series_per_strategy_not_per_round() {
        let f = figure(&three_rounds()).expect("a figure").expect("runs with cuts");
        let captions: Vec<_> = f.panels.iter().map(|p| p.caption.clone().unwrap_or_default()).collect();
        assert_eq!(captions, ["a cut every 1s (3 rounds)", "a cut every 100ms (3 rounds)"]);
        for p in &f.panels {
            assert_eq!(p.series.len(), 4, "three strategies and the reference");
            assert_eq!(p.lanes.len(), 3);
            assert_eq!(p.lanes.iter().map(|l| l.label.as_str()).collect::<Vec<_>>(), KNOWN);
            assert_eq!(p.lanes[0].marks.len(), 6, "two cuts in each of three rounds");
        }
        // The reference's first second over rounds of 100, 200, 300: median 200, band 100–300.
        let reference = &f.panels[0].series[0].points[0];
        assert_eq!((reference.low, reference.median, reference.high), (100.0, 200.0, 300.0));
        // Blocking (the second strategy) at 1 s: 11, 21, 31.
        let blocking = &f.panels[0].series[2].points[0];
        assert_eq!((blocking.low, blocking.median, blocking.high), (11.0, 21.0, 31.0));
        assert!(f.panels.iter().all(|p| p.y == f.panels[0].y && p.y.end > 300.0 && p.y.start < 10.0));
    }

    #[test]
    fn every_series_of_a_panel_has_its_own_colour_and_keeps_it_across_panels() {
        let f = figure(&three_rounds()).expect("a figure").expect("runs with cuts");
        let colors: Vec<RGBColor> = f.panels[0].series.iter().map(|s| s.color).collect();
        for (i, a) in colors.iter().enumerate() {
            assert!(!colors[i + 1..].contains(a), "{a:?} twice");
        }
        assert_eq!(colors, f.panels[1].series.iter().map(|s| s.color).collect::<Vec<_>>());
        let legend: Vec<RGBColor> = f.legend.entries.iter().map(|e| e.color).collect();
        assert_eq!(legend.len(), 4);
        assert!(legend.iter().all(|c| colors.contains(c)));
    }

    #[test]
    fn json_without_cut_times_draws_no_strip_and_more_strategies_than_colours_are_refused() {
        let mut s = three_rounds();
        s.runs.iter_mut().for_each(|r| r.cut_at_s.clear());
        let f = figure(&s).expect("a figure").expect("runs with cuts");
        assert!(f.panels.iter().all(|p| p.lanes.is_empty()));
        let many = (0..10).map(|i| run(&format!("s{i}"), "1s", &[1.0])).collect();
        assert!(matches!(
            figure(&strategies_json(many)),
            Err(StrategiesError::Chart(ChartError::TooManySeries { .. }))
        ));
    }

    #[test]
    fn runs_without_cuts_only_give_no_figure_and_a_bad_interval_is_an_error() {
        assert!(figure(&strategies_json(vec![run("consistent", NO_CUTS, &[1.0])])).expect("no error").is_none());
        let bad = strategies_json(vec![run("consistent", "often", &[1.0])]);
        assert!(matches!(figure(&bad), Err(StrategiesError::Interval(i)) if i == "often"));
    }

    #[test]
    fn a_file_that_is_not_the_scripts_json_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("strategies.json");
        std::fs::write(&path, br#"{"runs": [{"strategy": 3}]}"#).expect("written");
        assert!(matches!(read(&path), Err(StrategiesError::Parse { .. })));
        assert!(matches!(read(&dir.path().join("absent.json")), Err(StrategiesError::Read { .. })));
    }
}
