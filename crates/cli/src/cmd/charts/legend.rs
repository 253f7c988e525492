//! The legend, drawn in a column of its own (`layout`), never over a panel: one row per series
//! with a swatch drawn as the series is, then short notes on how to read the chart.

use super::style::{BAND_ALPHA, FONT, LEGEND_PX, LINE_WIDTH};
use super::{draw_err, ChartError};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const PAD_PX: i32 = 10;
const SWATCH_PX: i32 = 30;
const ROW_PX: i32 = 24;
const NOTE_PX: u32 = 13;
const NOTE_ROW_PX: i32 = 19;
const NOTE_COLOR: RGBColor = RGBColor(70, 70, 70);

/// How a series is drawn, and so its swatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swatch {
    /// A line.
    Line,
    /// A median line in its band.
    Band,
    /// A shaded span (e.g. a fault's window).
    Block,
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub label: String,
    pub color: RGBColor,
    pub swatch: Swatch,
}

#[derive(Clone, Debug, Default)]
pub struct Legend {
    pub entries: Vec<Entry>,
    /// How to read the chart, a short line each (the legend's column is only as wide as its
    /// longest line, and the panels get the rest).
    pub notes: Vec<String>,
}

/// How wide the legend's column must be for its longest line.
pub fn width_px<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, legend: &Legend) -> Result<u32, ChartError> {
    let (entry_font, note_font) = ((FONT, LEGEND_PX).into_font(), (FONT, NOTE_PX).into_font());
    let mut widest = 0;
    for e in &legend.entries {
        let (w, _) = area.estimate_text_size(&e.label, &entry_font.clone().into()).map_err(draw_err)?;
        widest = widest.max(w as i32 + SWATCH_PX + PAD_PX);
    }
    for n in &legend.notes {
        let (w, _) = area.estimate_text_size(n, &note_font.clone().into()).map_err(draw_err)?;
        widest = widest.max(w as i32);
    }
    Ok((widest + 2 * PAD_PX) as u32)
}

/// Draws `legend` at the top of `area`, boxed.
pub fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, legend: &Legend) -> Result<(), ChartError> {
    let (width, _) = area.dim_in_pixel();
    let notes_h = if legend.notes.is_empty() { 0 } else { PAD_PX + legend.notes.len() as i32 * NOTE_ROW_PX };
    let height = 2 * PAD_PX + legend.entries.len() as i32 * ROW_PX + notes_h;
    area.draw(&Rectangle::new([(0, 0), (width as i32 - 1, height)], BLACK.stroke_width(1))).map_err(draw_err)?;
    let text = TextStyle::from((FONT, LEGEND_PX).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in legend.entries.iter().enumerate() {
        let y = PAD_PX + i as i32 * ROW_PX + ROW_PX / 2;
        swatch(area, e, PAD_PX, y)?;
        area.draw_text(&e.label, &text, (PAD_PX + SWATCH_PX + PAD_PX, y)).map_err(draw_err)?;
    }
    let note = TextStyle::from((FONT, NOTE_PX).into_font()).color(&NOTE_COLOR).pos(Pos::new(HPos::Left, VPos::Center));
    let notes_top = PAD_PX + legend.entries.len() as i32 * ROW_PX + PAD_PX;
    for (i, n) in legend.notes.iter().enumerate() {
        area.draw_text(n, &note, (PAD_PX, notes_top + i as i32 * NOTE_ROW_PX + NOTE_ROW_PX / 2)).map_err(draw_err)?;
    }
    Ok(())
}

/// The swatch of `entry`, `SWATCH_PX` wide from `x`, centred on `y`.
fn swatch<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, e: &Entry, x: i32, y: i32) -> Result<(), ChartError> {
    let line = PathElement::new(vec![(x, y), (x + SWATCH_PX, y)], e.color.stroke_width(LINE_WIDTH));
    match e.swatch {
        Swatch::Line => area.draw(&line),
        Swatch::Band => area
            .draw(&Rectangle::new([(x, y - 7), (x + SWATCH_PX, y + 7)], e.color.mix(BAND_ALPHA).filled()))
            .and_then(|_| area.draw(&line)),
        Swatch::Block => area.draw(&Rectangle::new([(x, y - 5), (x + SWATCH_PX, y + 5)], e.color.filled())),
    }
    .map_err(draw_err)
}
