//! Errors of the simulator: bad input files (with the line at fault) and policies that break
//! the cluster's rules or whose engine fails.

/// What went wrong in a simulation or in reading its inputs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input (trace, cluster file, catalog set, option) is malformed. `origin` names the
    /// file and, for line-oriented formats, the line (`trace.csv:12`).
    #[error("{origin}: {problem}")]
    Input {
        /// File (and line) at fault.
        origin: String,
        /// What is wrong, for a person to read.
        problem: String,
    },
    /// A catalog could not be read or checked.
    #[error(transparent)]
    Catalog(#[from] tandem_catalog::Error),
    /// A policy asked for something the cluster's rules forbid (a bug in the policy, never in
    /// the input): the run stops rather than report numbers nobody could reproduce.
    #[error("policy {policy} broke a rule at t = {time_s:.1} s: {problem}")]
    Policy {
        /// The policy's name.
        policy: String,
        /// Simulated time of the decision.
        time_s: f64,
        /// The rule broken.
        problem: String,
    },
    /// The engine component failed (a trap, a deadline, an error it returned).
    #[error("policy {policy}: the engine failed")]
    Engine {
        /// The policy's name.
        policy: String,
        /// The host's error.
        source: tandem_host::Error,
    },
    /// The engine component failed to predict the utilization of the declared models of a
    /// file (a trap, a deadline, an error it returned).
    #[error("{origin}: the engine failed to predict the declared models' utilization")]
    Prediction {
        /// The declared-models file.
        origin: String,
        /// The host's error.
        source: tandem_host::Error,
    },
}

/// The simulator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An [`Error::Input`] for `origin`, line `line` (1-based, the header being line 1).
pub(crate) fn at_line(origin: &str, line: u64, problem: impl Into<String>) -> Error {
    Error::Input {
        origin: format!("{origin}:{line}"),
        problem: problem.into(),
    }
}
