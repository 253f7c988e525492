//! What every chart the CLI draws shares: DejaVu Sans embedded in the binary (no system fonts),
//! registered once, and the error a drawing gives.

use plotters::coord::CoordTranslate;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::sync::Once;

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("drawing the chart: {0}")]
    Draw(String),
    #[error("the embedded font is unreadable")]
    Font,
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

/// The legend of `chart`'s labelled series, at `position`, in the charts' one style.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), ChartError> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(position)
        .draw()
        .map_err(draw_err)
}
