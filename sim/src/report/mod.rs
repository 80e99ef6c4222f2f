//! How a [`Report`](crate::Report) is shown: a terminal table, JSON, or an HTML page with plots.

mod html;
mod table;

pub use html::html;
pub use table::table;
