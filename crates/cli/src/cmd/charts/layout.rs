//! Where the parts of a chart go, in pixels, before anything is drawn: the title across the top,
//! the panels stacked in a column, the legend in a column of its own to their right — so that
//! the legend can never cover data, whatever the data.

use super::style::{MARGIN_PX, PANEL_GAP_PX};
use super::ChartError;

/// The smallest panel worth drawing: room for its labels and some data.
const PANEL_MIN_PX: (i32, i32) = (240, 120);

/// A rectangle of pixels: `left..right` × `top..bottom` (right and bottom excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Rect {
    pub fn width(&self) -> i32 {
        self.right - self.left
    }

    pub fn height(&self) -> i32 {
        self.bottom - self.top
    }

    /// Whether the two share a pixel.
    pub fn intersects(&self, other: &Rect) -> bool {
        self.left < other.right && other.left < self.right && self.top < other.bottom && other.top < self.bottom
    }

    #[cfg(test)]
    pub fn contains(&self, other: &Rect) -> bool {
        self.left <= other.left && other.right <= self.right && self.top <= other.top && other.bottom <= self.bottom
    }

    /// `plotters` gives an area's pixels as two ranges.
    pub fn of_ranges((x, y): (std::ops::Range<i32>, std::ops::Range<i32>)) -> Rect {
        Rect { left: x.start, top: y.start, right: x.end, bottom: y.end }
    }
}

/// The parts of a chart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub title: Rect,
    /// Top to bottom, of equal height, `PANEL_GAP_PX` apart.
    pub panels: Vec<Rect>,
    pub legend: Rect,
}

/// What the frame is made for.
#[derive(Clone, Copy, Debug)]
pub struct FrameSpec {
    pub width: u32,
    pub height: u32,
    /// The title's line.
    pub title_px: u32,
    /// As wide as the legend's longest line needs.
    pub legend_px: u32,
    pub panels: usize,
}

/// The frame of `spec`, or why it cannot hold its panels.
pub fn frame(spec: FrameSpec) -> Result<Frame, ChartError> {
    let (width, height, margin) = (spec.width as i32, spec.height as i32, MARGIN_PX as i32);
    let title = Rect { left: 0, top: 0, right: width, bottom: spec.title_px as i32 };
    let (top, bottom) = (title.bottom, height - margin);
    let legend = Rect { left: width - margin - spec.legend_px as i32, top, right: width - margin, bottom };
    let column = Rect { left: margin, top, right: legend.left - margin, bottom };
    let (n, gap) = (spec.panels.max(1) as i32, PANEL_GAP_PX as i32);
    let each = (column.height() - (n - 1) * gap) / n;
    if column.width() < PANEL_MIN_PX.0 || each < PANEL_MIN_PX.1 {
        return Err(ChartError::TooSmall { width: spec.width, height: spec.height, panels: spec.panels });
    }
    let panels = (0..n)
        .map(|i| Rect {
            top: column.top + i * (each + gap),
            bottom: if i == n - 1 { column.bottom } else { column.top + i * (each + gap) + each },
            ..column
        })
        .collect();
    Ok(Frame { title, panels, legend })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(width: u32, height: u32, legend_px: u32, panels: usize) -> FrameSpec {
        FrameSpec { width, height, title_px: 40, legend_px, panels }
    }

    #[test]
    fn the_legend_shares_no_pixel_with_any_panel_or_the_title() {
        for (w, h, legend, n) in [(1200, 800, 260, 2), (1400, 600, 180, 1), (900, 900, 300, 3), (640, 480, 200, 1)] {
            let f = frame(spec(w, h, legend, n)).expect("room enough");
            assert_eq!(f.panels.len(), n);
            for p in &f.panels {
                assert!(!p.intersects(&f.legend), "{w}x{h}: panel {p:?} under the legend {:?}", f.legend);
                assert!(!p.intersects(&f.title), "{w}x{h}: panel {p:?} under the title");
            }
            assert!(!f.legend.intersects(&f.title));
            assert_eq!(f.legend.width(), legend as i32);
            let image = Rect { left: 0, top: 0, right: w as i32, bottom: h as i32 };
            assert!(image.contains(&f.legend) && f.panels.iter().all(|p| image.contains(p)));
        }
    }

    #[test]
    fn panels_are_stacked_apart_and_fill_the_column() {
        let f = frame(spec(1200, 901, 250, 3)).expect("room enough");
        for pair in f.panels.windows(2) {
            assert!(!pair[0].intersects(&pair[1]));
            assert_eq!(pair[0].bottom + PANEL_GAP_PX as i32, pair[1].top);
            assert!((pair[0].height() - pair[1].height()).abs() <= 2, "panels of about equal height");
        }
        assert_eq!(f.panels[0].top, f.title.bottom);
        assert_eq!(f.panels[2].bottom, 901 - MARGIN_PX as i32);
    }

    #[test]
    fn a_frame_too_small_for_its_panels_is_refused() {
        assert!(matches!(frame(spec(400, 800, 300, 1)), Err(ChartError::TooSmall { .. })));
        assert!(matches!(frame(spec(1200, 300, 200, 3)), Err(ChartError::TooSmall { .. })));
    }

    #[test]
    fn rectangles_that_only_touch_do_not_intersect() {
        let a = Rect { left: 0, top: 0, right: 10, bottom: 10 };
        assert!(!a.intersects(&Rect { left: 10, top: 0, right: 20, bottom: 10 }));
        assert!(a.intersects(&Rect { left: 9, top: 9, right: 20, bottom: 20 }));
    }
}
