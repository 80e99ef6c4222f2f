//! Why a call into the plugin failed.

use tandem_adapter_core::{CallError, EngineFailure};

/// Why a call into the plugin failed. Every message is meant for a person reading the
/// scheduler's log or a pod's events.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin arguments (`pluginConfig` args) are malformed; the message names the field.
    #[error("invalid Tandem plugin args: {0}")]
    Config(String),
    /// The engine component could not be loaded or started.
    #[error("cannot start the engine: {0}")]
    Start(String),
    /// The id secret could not be read or is unusable (the message names the file).
    #[error("idSecretFile: {0}")]
    Secret(String),
    /// The API server could not be reached with the scheduler's connection.
    #[error("cannot connect to the API server: {0}")]
    Connect(String),
    /// The stored knowledge base could not be read at start.
    #[error("cannot read the knowledge base: {0}")]
    Knowledge(String),
    /// The intake could not start (its address is taken, its certificate unreadable).
    #[error("cannot start the intake: {0}")]
    Intake(String),
    /// An object from the Go side could not be read.
    #[error("cannot read the {what} passed by the scheduler: {why}")]
    Input {
        /// Which object.
        what: &'static str,
        /// What was wrong with it, with the path of the field.
        why: String,
    },
    /// The engine failed (a trap, a deadline, a refusal).
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The engine thread did not take the call.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Reserve was called for a pod that PreFilter did not see last.
    #[error("Reserve for pod {0} without its PreFilter")]
    NotPrepared(String),
}
