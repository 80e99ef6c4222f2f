//! Printing answers: JSON for scripts or a table for a person, and the table bits every
//! command's renderer shares.

use comfy_table::{CellAlignment, Table};

use crate::args::Format;

/// Prints `value` as JSON for scripts, or as the table `table` makes for a person.
pub(crate) fn print_as<T: serde::Serialize>(
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Table => print!("{}", table()),
    }
    Ok(())
}

/// Right-aligns `columns` of `table` (numbers line up on their last digit).
pub(crate) fn right_align(table: &mut Table, columns: std::ops::Range<usize>) {
    for column in columns {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}
