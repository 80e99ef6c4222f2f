//! CSV with a header line, read whole, with errors that name the file, line and column.

use std::str::FromStr;

use super::input::Input;
use crate::error::{Error, Result};

/// A CSV file: its header and records.
pub(crate) struct Table {
    origin: String,
    headers: csv::StringRecord,
    records: Vec<csv::StringRecord>,
}

/// One record of a [`Table`].
#[derive(Clone, Copy)]
pub(crate) struct Row<'t> {
    table: &'t Table,
    record: &'t csv::StringRecord,
}

impl Table {
    /// Reads all of `input`; fields are trimmed of surrounding blanks.
    pub(crate) fn read(input: Input<'_>) -> Result<Self> {
        let csv_error = |e: csv::Error| {
            let location = match e.position() {
                Some(position) => format!("line {}", position.line()),
                None => "line ?".to_owned(),
            };
            let problem = match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!("{len} fields where the header has {expected_len}"),
                _ => e.to_string(),
            };
            source_error(input.origin, location, problem)
        };
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(input.text.as_bytes());
        let headers = reader.headers().map_err(csv_error)?.clone();
        let records = reader
            .records()
            .collect::<Result<Vec<_>, _>>()
            .map_err(csv_error)?;
        Ok(Self {
            origin: input.origin.to_owned(),
            headers,
            records,
        })
    }

    /// The file's name, for messages.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// The column titles.
    pub(crate) fn headers(&self) -> &csv::StringRecord {
        &self.headers
    }

    /// Fails unless the header has every one of `columns`.
    pub(crate) fn require(&self, columns: &[&str]) -> Result<()> {
        for column in columns {
            if !self.headers.iter().any(|h| h == *column) {
                return Err(source_error(
                    &self.origin,
                    "line 1".to_owned(),
                    format!("missing column `{column}`"),
                ));
            }
        }
        Ok(())
    }

    /// The records, in file order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.records.iter().map(move |record| Row {
            table: self,
            record,
        })
    }

    /// An error located at `line`.
    pub(crate) fn error_at(&self, line: u64, problem: String) -> Error {
        source_error(&self.origin, format!("line {line}"), problem)
    }
}

impl<'t> Row<'t> {
    /// The record's line in the file (1 is the header).
    pub(crate) fn line(&self) -> u64 {
        self.record.position().map_or(0, |p| p.line())
    }

    /// The field at position `index`, with the column title for messages.
    pub(crate) fn at(&self, index: usize) -> Result<&'t str> {
        self.record.get(index).ok_or_else(|| {
            self.table.error_at(
                self.line(),
                format!("no field {} (the record is short)", index + 1),
            )
        })
    }

    /// The text of `column` (which [`Table::require`] checked).
    pub(crate) fn text(&self, column: &str) -> Result<&'t str> {
        let index = self
            .table
            .headers
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| self.table.error_at(1, format!("missing column `{column}`")))?;
        self.at(index)
    }

    /// `column` parsed as a finite number (or integer).
    pub(crate) fn number<T: FromStr + Finite>(&self, column: &str) -> Result<T> {
        let text = self.text(column)?;
        self.parse(text, column)
    }

    /// `text`, taken from `column`, parsed as a finite number (or integer).
    pub(crate) fn parse<T: FromStr + Finite>(&self, text: &str, column: &str) -> Result<T> {
        match text.parse::<T>() {
            Ok(value) if value.is_finite_number() => Ok(value),
            _ => Err(self.error_in(column, format!("`{text}` is not {}", T::WHAT))),
        }
    }

    /// An error located at this record's line and `column`.
    pub(crate) fn error_in(&self, column: &str, problem: String) -> Error {
        source_error(
            &self.table.origin,
            format!("line {}, column `{column}`", self.line()),
            problem,
        )
    }
}

/// Numbers a converter reads: parsed values must be finite.
pub(crate) trait Finite {
    /// What the text should have been, for messages.
    const WHAT: &'static str;
    /// Whether the value is a usable number (always, for integers).
    fn is_finite_number(&self) -> bool;
}

impl Finite for f64 {
    const WHAT: &'static str = "a finite number";
    fn is_finite_number(&self) -> bool {
        self.is_finite()
    }
}

impl Finite for f32 {
    const WHAT: &'static str = "a finite number";
    fn is_finite_number(&self) -> bool {
        self.is_finite()
    }
}

impl Finite for u32 {
    const WHAT: &'static str = "a whole number";
    fn is_finite_number(&self) -> bool {
        true
    }
}

/// A [`Error::Source`].
pub(crate) fn source_error(origin: &str, location: String, problem: String) -> Error {
    Error::Source {
        origin: origin.to_owned(),
        location,
        problem,
    }
}
