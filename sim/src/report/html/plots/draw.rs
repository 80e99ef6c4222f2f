//! Drawing a [`Plot`] as SVG with `plotters`.
//!
//! Its font support (`ttf`/`ab_glyph`) is left off on purpose: the SVG backend then writes
//! every label as an SVG `<text>` element that the browser lays out with its own fonts, so
//! rendering the report needs no font files, and plotters only *estimates* text widths for its
//! layout (hence the generous label areas). Plotters escapes the text it writes (policy names
//! in legends), so the SVG is safe to embed as it is.

use std::error::Error;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::series::{Plot, Series};

/// Font sizes as plotters takes them. Its SVG backend writes `font-size` as the size / 1.24,
/// so these come out at about 14.5, 16 and 14.5 px: readable, and no smaller than 14 px.
const TICK_FONT: f64 = 18.0;
const AXIS_FONT: f64 = 20.0;
const LEGEND_FONT: f64 = 18.0;
const FONT_FAMILY: &str = "sans-serif";

/// Legend layout, px: the line sample and gap before a name, and a generous estimate of the
/// width of one of its characters (the browser, not plotters, chooses the font).
const LEGEND_SAMPLE_PX: u32 = 56;
const LEGEND_CHAR_PX: u32 = 9;

/// The plot as an SVG document: the chart on the left, the legend on the right (a legend
/// inside the chart would hide lines).
pub(crate) fn svg(plot: &Plot<'_>) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, plot.size).into_drawing_area();
        root.fill(&WHITE)?;
        // Room for the longest name, but never more than a third of the plot.
        let longest = plot
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        let legend_width =
            (LEGEND_SAMPLE_PX + LEGEND_CHAR_PX * longest as u32).clamp(140, plot.size.0 / 3);
        let (chart_area, legend_area) = root.split_horizontally(plot.size.0 - legend_width);
        let (y0, y1) = plot.y;
        if plot.log_x {
            chart(&chart_area, plot, (plot.x.0..plot.x.1).log_scale(), y0..y1)?;
        } else {
            chart(&chart_area, plot, plot.x.0..plot.x.1, y0..y1)?;
        }
        legend(&legend_area, &plot.series)?;
        root.present()?;
    }
    Ok(svg)
}

/// Draws the axes and the lines of `plot` on `area`, with `x` as the x axis (linear or log).
fn chart<X>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    plot: &Plot<'_>,
    x: X,
    y: std::ops::Range<f64>,
) -> Result<(), Box<dyn Error>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .margin_right(24)
        .x_label_area_size(64)
        .y_label_area_size(88)
        .build_cartesian_2d(x, y)?;
    let tick = |v: &f64| short(*v);
    chart
        .configure_mesh()
        .x_desc(plot.x_desc)
        .y_desc(plot.y_desc)
        .axis_desc_style((FONT_FAMILY, AXIS_FONT))
        .label_style((FONT_FAMILY, TICK_FONT))
        .x_labels(10)
        .y_labels(6)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    for series in &plot.series {
        let points = series.points.iter().copied();
        let style = series.look.shape();
        match series.look.dash {
            None => chart.draw_series(LineSeries::new(points, style))?,
            Some((dash, gap)) => {
                chart.draw_series(DashedLineSeries::new(points, dash, gap, style))?
            }
        };
    }
    Ok(())
}

/// One row per series: a sample of its line and its name.
fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    series: &[Series<'_>],
) -> Result<(), Box<dyn Error>> {
    let (_, height) = area.dim_in_pixel();
    let top = 24;
    let rows = series.len().max(1) as i32;
    let fits = (area.dim_in_pixel().0.saturating_sub(LEGEND_SAMPLE_PX) / LEGEND_CHAR_PX) as usize;
    // Rows 26 px apart, closer when many policies must fit (the text then overlaps a little
    // rather than leaving the plot).
    let row = ((height as i32 - top - 16) / rows).clamp(8, 26);
    let font = (FONT_FAMILY, LEGEND_FONT)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in series.iter().enumerate() {
        let y = top + row * i as i32 + row / 2;
        let line = vec![(4, y), (40, y)];
        // A little thicker than in the chart: a short sample needs it to show its colour.
        let style = s.look.shape().stroke_width(3);
        match s.look.dash {
            None => area.draw(&PathElement::new(line, style))?,
            Some((dash, gap)) => area.draw(&DashedPathElement::new(line, dash, gap, style))?,
        }
        area.draw(&Text::new(fit(s.name, fits), (48, y), font.clone()))?;
    }
    Ok(())
}

/// `name`, cut to `chars` characters with an ellipsis when longer (the table has it whole).
fn fit(name: &str, chars: usize) -> String {
    if name.chars().count() <= chars {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A tick label: at most three significant digits, no trailing zeros.
pub(crate) fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v:.0}");
    }
    let magnitude = v.abs().log10().floor();
    if magnitude >= 3.0 {
        return format!("{v:.0}");
    }
    let decimals = (2.0 - magnitude).clamp(0.0, 8.0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}
