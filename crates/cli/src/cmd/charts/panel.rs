//! One panel: series over the seconds of a run, each a median line in its band, and under the
//! panel a strip with a lane per series for its events (a cut's tick, a fault's window) — under
//! the data and its axis, not over them.

use super::band::BandPoint;
use super::layout::Rect;
use super::style::{
    AXIS_LABEL_PX, BAND_ALPHA, CAPTION_PX, FONT, HEADROOM, LANE_LABEL_PX, LANE_PX, LINE_WIDTH, X_LABEL_AREA_PX,
    Y_LABEL_AREA_PX,
};
use super::{draw_err, ChartError};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

/// Right of the plot, so the last x label is not cut.
const RIGHT_PX: u32 = 18;
/// Above the plot, so the top y label is not cut.
const TOP_PX: u32 = 8;
/// Between the plot and its strip.
const STRIP_GAP_PX: u32 = 6;
const STRIP_BACKGROUND: RGBColor = RGBColor(244, 244, 244);
const GRID: RGBColor = RGBColor(200, 200, 200);

/// A series of the panel.
#[derive(Clone, Debug)]
pub struct Series {
    pub color: RGBColor,
    pub points: Vec<BandPoint>,
}

/// An event under the panel: a tick where `from == to`, a span otherwise (seconds of the run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mark {
    pub from: f64,
    pub to: f64,
}

/// One lane of the strip under the panel: the events of one series, in its colour.
#[derive(Clone, Debug)]
pub struct Lane {
    /// Short: it is written left of the lane, in the y labels' column.
    pub label: String,
    pub color: RGBColor,
    pub marks: Vec<Mark>,
}

#[derive(Clone, Debug)]
pub struct Panel {
    /// Above the panel (e.g. which cut interval it shows).
    pub caption: Option<String>,
    pub x_desc: String,
    pub y_desc: String,
    pub x_max: f64,
    /// The y axis: `y_from_zero` or `y_around` the series.
    pub y: Range<f64>,
    pub series: Vec<Series>,
    /// The strip under the panel; none without lanes.
    pub lanes: Vec<Lane>,
}

/// Where a panel's data went, in pixels of the image.
#[derive(Clone, Copy, Debug)]
pub struct Drawn {
    pub plot: Rect,
    pub strip: Option<Rect>,
}

/// A y axis from zero to above the highest value of `series`: for counts that may drop to zero
/// and latencies.
pub fn y_from_zero<'a>(series: impl IntoIterator<Item = &'a Series>) -> Range<f64> {
    let high = series.into_iter().flat_map(|s| s.points.iter().map(|p| p.high)).fold(0.0, f64::max);
    0.0..(high * HEADROOM).max(1.0)
}

/// A y axis around the values of `series`, with room above and below: for throughputs that
/// differ by a few percent, which an axis from zero would squeeze into a line. The bands show
/// how much of a difference is noise.
pub fn y_around<'a>(series: impl IntoIterator<Item = &'a Series>) -> Range<f64> {
    let points: Vec<&BandPoint> = series.into_iter().flat_map(|s| &s.points).collect();
    let low = points.iter().map(|p| p.low).fold(f64::INFINITY, f64::min);
    let high = points.iter().map(|p| p.high).fold(0.0, f64::max);
    if !low.is_finite() || high <= low {
        return 0.0..(high * HEADROOM).max(1.0);
    }
    let room = (high - low) * (HEADROOM - 1.0) * 2.0;
    (low - room).max(0.0)..high + room
}

/// A tick's label with the decimals it needs and no more: "1200", "2.5", "0.25" (not "1200.0").
fn tick_label(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<Drawn, ChartError> {
    let area = match &panel.caption {
        Some(c) => area.titled(c, (FONT, CAPTION_PX)).map_err(draw_err)?,
        None => area.clone(),
    };
    let (_, height) = area.dim_in_pixel();
    if panel.lanes.is_empty() {
        let plot = plot(&area, panel, true)?;
        return Ok(Drawn { plot, strip: None });
    }
    let strip_h = STRIP_GAP_PX + panel.lanes.len() as u32 * LANE_PX + X_LABEL_AREA_PX;
    let (top, bottom) = area.split_vertically(height.saturating_sub(strip_h));
    let plot = plot(&top, panel, false)?;
    let strip = strip(&bottom, panel)?;
    Ok(Drawn { plot, strip: Some(strip) })
}

/// The series; with `x_labels`, the x axis under them (else the strip carries it).
fn plot<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel, x_labels: bool) -> Result<Rect, ChartError> {
    let mut chart = ChartBuilder::on(area)
        .margin_top(TOP_PX)
        .margin_right(RIGHT_PX)
        .x_label_area_size(if x_labels { X_LABEL_AREA_PX } else { 0 })
        .y_label_area_size(Y_LABEL_AREA_PX)
        .build_cartesian_2d(0f64..panel.x_max.max(1.0), panel.y.clone())
        .map_err(draw_err)?;
    let label = |v: &f64| tick_label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(&panel.y_desc)
        .label_style((FONT, AXIS_LABEL_PX))
        .x_label_formatter(&label)
        .y_label_formatter(&label)
        .bold_line_style(GRID.mix(0.5))
        .light_line_style(TRANSPARENT);
    if x_labels {
        mesh.x_desc(&panel.x_desc);
    }
    mesh.draw().map_err(draw_err)?;
    // Every band before any line, so that no band hides another series' median.
    for s in &panel.series {
        if s.points.iter().any(|p| p.high > p.low) {
            let outline: Vec<(f64, f64)> =
                s.points.iter().map(|p| (p.x, p.high)).chain(s.points.iter().rev().map(|p| (p.x, p.low))).collect();
            chart
                .draw_series(std::iter::once(Polygon::new(outline, s.color.mix(BAND_ALPHA).filled())))
                .map_err(draw_err)?;
        }
    }
    for s in &panel.series {
        let line = s.points.iter().map(|p| (p.x, p.median));
        chart.draw_series(LineSeries::new(line, s.color.stroke_width(LINE_WIDTH))).map_err(draw_err)?;
    }
    Ok(Rect::of_ranges(chart.plotting_area().get_pixel_range()))
}

/// The strip: a lane per series, top to bottom in the order given, then the x axis.
fn strip<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Result<Rect, ChartError> {
    let lanes = panel.lanes.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .margin_top(STRIP_GAP_PX)
        .margin_right(RIGHT_PX)
        .x_label_area_size(X_LABEL_AREA_PX)
        .y_label_area_size(Y_LABEL_AREA_PX)
        .build_cartesian_2d(0f64..panel.x_max.max(1.0), 0f64..lanes)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&STRIP_BACKGROUND).map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_label_formatter(&|v| tick_label(*v))
        .x_desc(&panel.x_desc)
        .label_style((FONT, AXIS_LABEL_PX))
        .draw()
        .map_err(draw_err)?;
    for (i, lane) in panel.lanes.iter().enumerate() {
        // Lane 0 at the top: y grows upwards.
        let base = lanes - 1.0 - i as f64;
        let ticks = lane.marks.iter().filter(|m| m.to <= m.from);
        let tick =
            |m: &Mark| PathElement::new(vec![(m.from, base + 0.15), (m.from, base + 0.85)], lane.color.stroke_width(1));
        chart.draw_series(ticks.map(tick)).map_err(draw_err)?;
        let spans = lane.marks.iter().filter(|m| m.to > m.from);
        let span =
            |m: &Mark| Rectangle::new([(m.from, base + 0.15), (m.to, base + 0.85)], lane.color.mix(0.75).filled());
        chart.draw_series(spans.map(span)).map_err(draw_err)?;
        lane_label(&chart, &lane.label, base + 0.5)?;
    }
    Ok(Rect::of_ranges(chart.plotting_area().get_pixel_range()))
}

/// `label` right-aligned just left of the strip, at height `y` (in lanes).
fn lane_label<DB: DrawingBackend>(
    chart: &ChartContext<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    label: &str,
    y: f64,
) -> Result<(), ChartError> {
    let plot = chart.plotting_area();
    let (_, base_y) = plot.get_base_pixel();
    let (_, at_y) = chart.backend_coord(&(0.0, y));
    let style = TextStyle::from((FONT, LANE_LABEL_PX).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    plot.strip_coord_spec().draw_text(label, &style, (-6, at_y - base_y)).map_err(draw_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[(f64, f64)]) -> Series {
        let points = values.iter().enumerate().map(|(i, (low, high))| BandPoint {
            x: i as f64 + 0.5,
            low: *low,
            median: (low + high) / 2.0,
            high: *high,
            rounds: 2,
        });
        Series { color: RGBColor(0, 0, 0), points: points.collect() }
    }

    #[test]
    fn an_axis_around_the_values_holds_every_band_with_room() {
        let s = [series(&[(900.0, 1000.0), (950.0, 1100.0)]), series(&[(800.0, 850.0)])];
        let y = y_around(&s);
        assert!(y.start < 800.0 && y.start > 0.0, "{y:?}");
        assert!(y.end > 1100.0 && y.end < 1200.0, "{y:?}");
        let zero = y_from_zero(&s);
        assert_eq!(zero.start, 0.0);
        assert!(zero.end > 1100.0);
    }

    #[test]
    fn flat_or_empty_series_still_get_an_axis() {
        let flat = y_around(&[series(&[(5.0, 5.0)])]);
        assert!(flat.start < 5.0 && flat.end > 5.0, "{flat:?}");
        let empty = y_around(&[]);
        assert!(empty.end > empty.start);
    }

    #[test]
    fn tick_labels_carry_the_decimals_they_need_and_no_more() {
        assert_eq!(tick_label(1200.0), "1200");
        assert_eq!(tick_label(3.0), "3");
        assert_eq!(tick_label(1.5), "1.5");
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(0.0), "0");
    }
}
