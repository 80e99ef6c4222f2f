//! How each policy is drawn: its colour and, once the palette repeats, a dash pattern; the
//! same in the results table (a CSS swatch) and in every plot (a plotters style).

use plotters::prelude::*;

/// Ten colours that stay apart on white (the "category10" palette); a policy keeps its colour
/// in the table and in every plot.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Dash patterns, `(dash, gap)` in pixels, for the second, third, … round of the palette, so
/// two policies never share both colour and line.
const DASHES: [Option<(u32, u32)>; 4] = [None, Some((10, 6)), Some((3, 4)), Some((18, 5))];

/// How a policy is drawn: its colour and, once the palette repeats, a dash pattern.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    pub(crate) color: RGBColor,
    pub(crate) dash: Option<(u32, u32)>,
}

impl Look {
    /// The look of the `index`-th applicable policy of the report.
    pub(crate) fn of(index: usize) -> Self {
        let (r, g, b) = PALETTE[index % PALETTE.len()];
        Self {
            color: RGBColor(r, g, b),
            dash: DASHES[(index / PALETTE.len()) % DASHES.len()],
        }
    }

    /// The colour as CSS.
    pub(crate) fn css_color(&self) -> String {
        let RGBColor(r, g, b) = self.color;
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// A short horizontal sample of the line, as a CSS background, for the table.
    pub(crate) fn css_swatch(&self) -> String {
        let color = self.css_color();
        match self.dash {
            None => format!("background:{color}"),
            Some((dash, gap)) => format!(
                "background:repeating-linear-gradient(to right,{color} 0 {dash}px,\
                 transparent {dash}px {}px)",
                dash + gap
            ),
        }
    }

    /// The plotters style of the line.
    pub(crate) fn shape(&self) -> ShapeStyle {
        ShapeStyle {
            color: self.color.to_rgba(),
            filled: false,
            stroke_width: 2,
        }
    }
}
