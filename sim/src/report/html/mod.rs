//! The HTML report: one self-contained page (inline CSS, inline SVG plots, no scripts, fonts or
//! network) with the reproducing command, the inputs and settings, the results table, three
//! plots and how to read them.
//!
//! [`page`](html) is the markup, written with `maud` so that every value from the report is
//! escaped by construction; `plots` decides what each plot shows and draws it as SVG with
//! `plotters`. The page imports the plots, never the reverse.

mod page;
mod plots;
#[cfg(test)]
mod tests;

pub use page::html;
