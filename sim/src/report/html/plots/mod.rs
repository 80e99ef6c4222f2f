//! The report's plots: what each shows ([`sections`]), how each policy looks ([`look`]), the
//! series and axes ([`series`]) and the drawing as SVG ([`draw`]). Imports point one way:
//! `sections` → `draw` → `series` → `look`.

pub(crate) mod draw;
pub(crate) mod look;
pub(crate) mod sections;
pub(crate) mod series;
