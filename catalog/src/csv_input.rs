//! Reading the simulator's CSV inputs (traces, clusters, the Alibaba lists) with errors that
//! name the file and line.

use std::path::Path;

use crate::error::{Error, Result, at_line};

/// The text of the file at `path` and its name for errors.
pub(crate) fn read(path: &Path) -> Result<(String, String)> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadInput {
        path: path.to_path_buf(),
        source,
    })?;
    Ok((text, path.display().to_string()))
}

/// A CSV reader over `text` (fields trimmed) and the positions of `columns` in its header, or
/// an error naming the first missing column and the columns found.
pub(crate) fn open<'t>(
    text: &'t str,
    origin: &str,
    columns: &[&str],
) -> Result<(csv::Reader<&'t [u8]>, Vec<usize>)> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| at_line(origin, 1, format!("cannot read the header: {e}")))?
        .clone();
    let index = columns
        .iter()
        .map(|column| {
            headers.iter().position(|h| h == *column).ok_or_else(|| {
                at_line(
                    origin,
                    1,
                    format!(
                        "missing column `{column}` (the header must name {}; found {})",
                        columns.join(", "),
                        headers.iter().collect::<Vec<_>>().join(", ")
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((reader, index))
}

/// A record of `text` and its line, or the error naming the line of a malformed row.
pub(crate) fn row(
    record: std::result::Result<csv::StringRecord, csv::Error>,
    text: &str,
    origin: &str,
) -> Result<(csv::StringRecord, u64)> {
    let record = record.map_err(|e| {
        let line = e.position().map_or(0, |p| line_of(text, p.byte()));
        at_line(origin, line, format!("malformed row: {e}"))
    })?;
    let line = record.position().map_or(0, |p| line_of(text, p.byte()));
    Ok((record, line))
}

/// The 1-based line of the record the csv crate places at byte offset `byte` of `text`. Its
/// own line count skips blank lines, and its offsets point before the blank lines it skipped,
/// so the record's first line is found past them.
fn line_of(text: &str, byte: u64) -> u64 {
    let bytes = text.as_bytes();
    let mut end = usize::try_from(byte).unwrap_or(usize::MAX).min(bytes.len());
    while end < bytes.len() && matches!(bytes[end], b'\n' | b'\r') {
        end += 1;
    }
    1 + bytes[..end].iter().filter(|&&b| b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_blank_lines_and_missing_columns_are_named() {
        let text = "a,b\n1,2\n\n\n3,4\n";
        let (mut reader, index) = open(text, "f.csv", &["b"]).unwrap();
        assert_eq!(index, [1]);
        let lines: Vec<u64> = reader
            .records()
            .map(|r| row(r, text, "f.csv").unwrap().1)
            .collect();
        assert_eq!(lines, [2, 5]);
        let error = open(text, "f.csv", &["c"]).unwrap_err().to_string();
        assert_eq!(
            error,
            "f.csv:1: missing column `c` (the header must name c; found a, b)"
        );
    }
}
