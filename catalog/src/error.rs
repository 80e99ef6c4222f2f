//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong reading, checking, writing or converting public data: a
/// catalog, a trace or cluster file, a public trace being converted. Every message names the
/// file (or catalog) at fault, then the field or line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file (a catalog or a converter's source) could not be read.
    #[error("{}: cannot read the file", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },

    /// A catalog could not be written: creating, writing or syncing the temporary file, or
    /// renaming it over the target, failed. The target is left as it was.
    #[error("{}: cannot write the catalog", path.display())]
    Write {
        /// The target file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },

    /// The text is not JSON of the catalog's shape (syntax, a missing or unknown field, a value
    /// of the wrong type).
    #[error("{origin}: {field}: {message}")]
    Json {
        /// The file or other origin of the text.
        origin: String,
        /// Path of the offending field, such as `pairs[3].speed_a` (`.` for the whole document).
        field: String,
        /// What is wrong, with the line and column.
        message: String,
    },

    /// The catalog is well-formed but breaks a rule of the format: a duplicate name, a reference
    /// to an unknown job type or GPU model, a speed that is not finite and positive, and so on.
    #[error("{origin}: {field}: {problem}")]
    Invalid {
        /// The file the catalog came from, or `catalog <name>` for one built in memory.
        origin: String,
        /// Path of the offending field, such as `job_types[2].name`.
        field: String,
        /// What is wrong.
        problem: String,
    },

    /// A converter's source file is malformed or contradicts itself (a missing column, a value
    /// that is not a number, a pair naming an unknown job, two orientations that disagree).
    #[error("{origin}: {location}: {problem}")]
    Source {
        /// The source file.
        origin: String,
        /// Where in it: a line and column, or a JSON path.
        location: String,
        /// What is wrong.
        problem: String,
    },

    /// A trace or cluster file could not be read (the cause is the source, as everywhere: a
    /// cause printed in the message and again as the source would show twice in a chain).
    #[error("cannot read {path}")]
    ReadInput {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },

    /// A line-oriented input (a trace, a cluster file, a public trace being converted) is
    /// malformed, or an option of a trace conversion is out of range. `origin` names the file
    /// and, for line-oriented formats, the line (`trace.csv:12`).
    #[error("{origin}: {problem}")]
    Input {
        /// File (and line) at fault.
        origin: String,
        /// What is wrong, for a person to read.
        problem: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An [`Error::Input`] for `origin`, line `line` (1-based, the header being line 1).
pub(crate) fn at_line(origin: &str, line: u64, problem: impl Into<String>) -> Error {
    Error::Input {
        origin: format!("{origin}:{line}"),
        problem: problem.into(),
    }
}
