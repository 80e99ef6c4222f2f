//! The one error type of the crate.

use std::path::PathBuf;

/// What can stop an evaluation. Each cause is either in the message or the `source`, never
/// both, so a printed chain names it once.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is out of range, or does not fit the catalog (a GPU model it lacks, a queue
    /// larger than its job types); the message names the option.
    #[error("{0}")]
    Setting(String),

    /// The catalog cannot be read or is not a valid catalog.
    #[error(transparent)]
    Catalog(#[from] tandem_catalog::Error),

    /// The catalog is valid but offers too little to evaluate on (fewer than two job types with
    /// solo data on the GPU model).
    #[error("{}: {problem}", file.display())]
    Unusable {
        /// The catalog file.
        file: PathBuf,
        /// What it lacks.
        problem: String,
    },

    /// An engine call failed (a trap, a deadline, or an error value the engine returned).
    #[error("{doing}")]
    Engine {
        /// What the evaluation asked of the engine.
        doing: &'static str,
        /// The host's error.
        #[source]
        source: tandem_host::Error,
    },

    /// The engine answered something no valid answer holds (a job that was not queued, more
    /// jobs on a GPU than the policy allows): a bug in the engine.
    #[error("{0}")]
    Answer(String),

    /// A memory predictor could not be trained on a fold.
    #[error(transparent)]
    Memory(#[from] tandem_engine::memory::MemoryError),

    /// A utilization predictor could not be trained on a fold.
    #[error(transparent)]
    Utilization(#[from] tandem_engine::utilization::UtilizationError),
}

impl Error {
    /// Whether the user can fix this in their input (the settings or the catalog), rather than
    /// it being a failure of the engine or the evaluation.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::Setting(_) | Error::Catalog(_) | Error::Unusable { .. }
        )
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
