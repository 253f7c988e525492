//! What every chart the CLI draws shares, so that they all look alike: a figure is a title,
//! panels stacked in a column, and a legend in a column of its own beside them (`layout`); each
//! panel draws series as a median line in a min–max band over rounds (`band`), and events —
//! cuts, fault windows — in a strip under its axis (`panel`); colours, fonts and sizes come from
//! `style`. Text is DejaVu Sans embedded in the binary: no system fonts.

pub mod band;
pub mod layout;
pub mod legend;
pub mod panel;
pub mod style;

use layout::{FrameSpec, Rect};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("drawing the chart: {0}")]
    Draw(String),
    #[error("the embedded font is unreadable")]
    Font,
    #[error("{asked} series to draw but {colors} distinct colours: a colour is never given twice")]
    TooManySeries { asked: usize, colors: usize },
    #[error("a {width}x{height} chart has no room for {panels} panels and the legend")]
    TooSmall { width: u32, height: u32, panels: usize },
    #[error("the legend would cover data (legend {legend:?}, data {data:?})")]
    LegendOverData { legend: Rect, data: Rect },
}

pub fn draw_err<E: std::fmt::Debug>(e: E) -> ChartError {
    ChartError::Draw(format!("{e:?}"))
}

/// Registers the embedded font as "sans-serif" (once per process).
pub fn register_font() -> Result<(), ChartError> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| ChartError::Font);
    });
    result
}

/// A whole chart.
#[derive(Clone, Debug)]
pub struct Figure {
    pub title: String,
    pub width: u32,
    pub height: u32,
    /// Top to bottom.
    pub panels: Vec<panel::Panel>,
    pub legend: legend::Legend,
}

/// Where a figure's parts went, in pixels.
#[derive(Clone, Debug)]
pub struct Drawn {
    pub panels: Vec<panel::Drawn>,
    pub legend: Rect,
}

/// Draws `figure` as a PNG into `file`.
pub fn draw_png(figure: &Figure, file: &Path) -> Result<Drawn, ChartError> {
    let root = BitMapBackend::new(file, (figure.width, figure.height)).into_drawing_area();
    let drawn = draw_on(&root, figure)?;
    root.present().map_err(draw_err)?;
    Ok(drawn)
}

/// Draws `figure` on `root`, an area of `figure.width` × `figure.height` pixels.
pub fn draw_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, figure: &Figure) -> Result<Drawn, ChartError> {
    register_font()?;
    root.fill(&WHITE).map_err(draw_err)?;
    let title_font = (style::FONT, style::TITLE_PX).into_font();
    let (_, title_h) = root.estimate_text_size(&figure.title, &title_font.clone().into()).map_err(draw_err)?;
    let frame = layout::frame(FrameSpec {
        width: figure.width,
        height: figure.height,
        title_px: title_h + 2 * style::MARGIN_PX,
        legend_px: legend::width_px(root, &figure.legend)?,
        panels: figure.panels.len(),
    })?;
    let title_style = TextStyle::from(title_font).pos(Pos::new(HPos::Center, VPos::Center));
    let at = (frame.title.left + frame.title.width() / 2, frame.title.top + frame.title.height() / 2);
    root.draw_text(&figure.title, &title_style, at).map_err(draw_err)?;
    let mut panels = vec![];
    for (p, rect) in figure.panels.iter().zip(&frame.panels) {
        panels.push(panel::draw(&area_of(root, rect), p)?);
    }
    legend::draw(&area_of(root, &frame.legend), &figure.legend)?;
    let drawn = Drawn { panels, legend: frame.legend };
    check_legend_apart(&drawn)?;
    Ok(drawn)
}

/// The layout keeps the legend in a column of its own; this keeps it so should a change to the
/// panels (a wider label area, a longer strip) ever push data under it.
fn check_legend_apart(drawn: &Drawn) -> Result<(), ChartError> {
    let data = drawn.panels.iter().flat_map(|p| std::iter::once(p.plot).chain(p.strip));
    match data.into_iter().find(|d| d.intersects(&drawn.legend)) {
        Some(data) => Err(ChartError::LegendOverData { legend: drawn.legend, data }),
        None => Ok(()),
    }
}

fn area_of<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Rect) -> DrawingArea<DB, Shift> {
    root.clone().shrink((r.left, r.top), (r.width(), r.height()))
}

/// The width and height a PNG file's header gives (its IHDR chunk), or `None` if `bytes` are not
/// a PNG: the tests' check of a drawn chart.
#[cfg(test)]
pub fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    const MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
    if !bytes.starts_with(MAGIC) || bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let be = |at: usize| bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
    Some((be(16)?, be(20)?))
}

#[cfg(test)]
mod tests {
    use super::band::median_band;
    use super::legend::{Entry, Legend, Swatch};
    use super::panel::{Lane, Mark, Panel, Series};
    use super::*;

    /// A figure like the strategies chart: two panels with strips, three series each.
    fn figure(width: u32, height: u32) -> Figure {
        let series = |i: usize| Series {
            color: style::color(i).expect("three colours"),
            points: median_band(&[vec![100.0 + i as f64; 10], vec![120.0; 8]]),
        };
        let lanes = |i: usize| Lane {
            label: format!("series {i}"),
            color: style::color(i).expect("three colours"),
            marks: (0..10).map(|s| Mark { from: s as f64, to: s as f64 }).collect(),
        };
        let panel = Panel {
            caption: Some("a panel".into()),
            x_desc: "second".into(),
            y_desc: "per second".into(),
            x_max: 10.0,
            y: 0.0..200.0,
            series: (0..3).map(series).collect(),
            lanes: (0..3).map(lanes).collect(),
        };
        let entry = |i: usize| Entry {
            label: format!("a rather long series name {i}"),
            color: style::color(i).expect("three colours"),
            swatch: Swatch::Band,
        };
        Figure {
            title: "a figure".into(),
            width,
            height,
            panels: vec![panel.clone(), panel],
            legend: Legend { entries: (0..3).map(entry).collect(), notes: vec!["a note on how to read it".into()] },
        }
    }

    #[test]
    fn no_plot_or_strip_lies_under_the_legend_once_drawn() {
        register_font().expect("the font");
        for (w, h) in [(1200, 900), (900, 700)] {
            let mut buffer = vec![0u8; (w * h * 3) as usize];
            let root = BitMapBackend::with_buffer(&mut buffer, (w, h)).into_drawing_area();
            let drawn = draw_on(&root, &figure(w, h)).expect("drawn");
            assert_eq!(drawn.panels.len(), 2);
            for p in &drawn.panels {
                let strip = p.strip.expect("lanes give a strip");
                assert!(!p.plot.intersects(&drawn.legend), "{w}x{h}: plot {:?} under {:?}", p.plot, drawn.legend);
                assert!(!strip.intersects(&drawn.legend), "{w}x{h}: strip under the legend");
                // The strip is under its plot, not over it, and aligned with it.
                assert!(strip.top >= p.plot.bottom, "strip {strip:?} over the plot {:?}", p.plot);
                assert_eq!((strip.left, strip.right), (p.plot.left, p.plot.right));
            }
            assert!(drawn.panels[0].plot.bottom <= drawn.panels[1].plot.top);
        }
    }

    #[test]
    fn a_legend_over_data_is_an_error() {
        let rect = |left, right| Rect { left, top: 0, right, bottom: 100 };
        let panel = |strip| panel::Drawn { plot: rect(0, 100), strip };
        let apart = Drawn { panels: vec![panel(Some(rect(0, 100)))], legend: rect(110, 200) };
        assert!(check_legend_apart(&apart).is_ok());
        let over_plot = Drawn { panels: vec![panel(None)], legend: rect(90, 200) };
        assert!(matches!(check_legend_apart(&over_plot), Err(ChartError::LegendOverData { .. })));
        let over_strip = Drawn { panels: vec![panel(Some(rect(0, 150)))], legend: rect(110, 200) };
        assert!(matches!(check_legend_apart(&over_strip), Err(ChartError::LegendOverData { .. })));
    }

    #[test]
    fn the_png_header_gives_the_size_and_anything_else_is_not_a_png() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("figure.png");
        draw_png(&figure(1000, 700), &file).expect("drawn");
        let bytes = std::fs::read(&file).expect("the PNG");
        assert_eq!(png_size(&bytes), Some((1000, 700)));
        assert_eq!(png_size(b"GIF89a and more bytes than a header"), None);
        assert_eq!(png_size(&bytes[..20]), None, "a cut header");
    }
}
