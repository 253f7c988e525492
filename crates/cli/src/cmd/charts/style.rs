//! The one look of every chart: a palette of distinct colours, the font sizes, the margins and
//! the sizes of the label areas and of the tick strip. Charts take these, never their own.

use super::ChartError;
use plotters::style::RGBColor;

/// Tableau's ten but its grey (kept for the reference): distinct hues, told apart by most
/// colour-blind readers, and none so light that a line or a tick vanishes on white. A chart
/// needing more series is refused, never given a colour twice: two series in one colour read as
/// one.
pub const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A reference series (e.g. the runs without cuts), which the others are read against: grey,
/// so that it does not compete with them.
pub const REFERENCE: RGBColor = RGBColor(110, 110, 110);

/// The colour of the `index`th series of a chart.
pub fn color(index: usize) -> Result<RGBColor, ChartError> {
    PALETTE.get(index).copied().ok_or(ChartError::TooManySeries { asked: index + 1, colors: PALETTE.len() })
}

pub const FONT: &str = "sans-serif";
pub const TITLE_PX: u32 = 22;
/// A panel's caption, above it.
pub const CAPTION_PX: u32 = 17;
pub const AXIS_LABEL_PX: u32 = 14;
pub const LEGEND_PX: u32 = 14;
/// The names of a tick strip's lanes, left of it.
pub const LANE_LABEL_PX: u32 = 12;

/// Around the image, and between the panels' column and the legend's.
pub const MARGIN_PX: u32 = 12;
/// Between two panels, so that one's axis description and the next one's caption do not touch.
pub const PANEL_GAP_PX: u32 = 18;
/// Left of a panel: the y labels and the axis description (and the names of its strip's lanes).
pub const Y_LABEL_AREA_PX: u32 = 90;
/// Under the lowest strip of a panel: the x labels and the axis description.
pub const X_LABEL_AREA_PX: u32 = 42;
/// One lane of a tick strip (the marks of one series).
pub const LANE_PX: u32 = 12;
/// A series' median line.
pub const LINE_WIDTH: u32 = 2;
/// The opacity of a series' band: light enough that two overlapping bands stay readable.
pub const BAND_ALPHA: f64 = 0.2;
/// Headroom above the highest value, so that no line runs along the panel's top edge.
pub const HEADROOM: f64 = 1.1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_palette_never_repeats_a_colour() {
        let colors: Vec<RGBColor> = (0..PALETTE.len()).map(|i| color(i).expect("within the palette")).collect();
        for (i, a) in colors.iter().enumerate() {
            for b in &colors[i + 1..] {
                assert_ne!(a, b, "a colour given to two series");
            }
        }
        assert!(!colors.contains(&REFERENCE), "the reference's grey is a series' colour too");
    }

    #[test]
    fn a_series_past_the_palette_is_refused_not_given_a_used_colour() {
        assert!(matches!(color(PALETTE.len()), Err(ChartError::TooManySeries { asked: 10, colors: 9 })));
    }

    #[test]
    fn no_colour_is_too_light_to_see_on_white() {
        // Relative luminance below 0.7: a 2-pixel line of each stays visible on white.
        for c in PALETTE.into_iter().chain([REFERENCE]) {
            let lum = (0.2126 * c.0 as f64 + 0.7152 * c.1 as f64 + 0.0722 * c.2 as f64) / 255.0;
            assert!(lum < 0.7, "{c:?} is too light ({lum:.2})");
        }
    }
}
