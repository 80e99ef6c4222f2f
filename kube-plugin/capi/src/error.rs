//! Why a call into the plugin failed.

use tandem_adapter_core::EngineError;
use tandem_adapter_core::identity::SecretFileError;

/// A cause kept whole, for [`Error`]'s start-up variants: the host's, Tokio's, kube's or the
/// core's own error (the C ABI prints the chain, each cause once).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a call into the plugin failed. Every message is meant for a person reading the
/// scheduler's log or a pod's events.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin arguments (`pluginConfig` args) are malformed; the message names the field.
    #[error("invalid Tandem plugin args: {0}")]
    Config(String),
    /// What the plugin runs on could not be started: the engine component, its runtime, the
    /// core.
    #[error("cannot start {what}")]
    Start {
        /// What.
        what: &'static str,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The id secret could not be read or is unusable (the cause names the file).
    #[error("idSecretFile")]
    Secret(#[source] SecretFileError),
    /// The intake token could not be read.
    #[error("intakeTokenFile")]
    Token(#[source] Cause),
    /// The API server could not be reached with the scheduler's connection.
    #[error("cannot connect to the API server: {what}")]
    Connect {
        /// Where, or what of the connection was wrong.
        what: String,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The stored knowledge base could not be read at start.
    #[error("cannot read the knowledge base")]
    Knowledge(#[source] Cause),
    /// The intake could not start (its address is taken, its certificate unreadable).
    #[error("cannot start the intake: {what}")]
    Intake {
        /// The setting it could not start with.
        what: String,
        /// Why.
        #[source]
        source: Cause,
    },
    /// An object from the Go side could not be read.
    #[error("cannot read the {what} passed by the scheduler: {why}")]
    Input {
        /// Which object.
        what: &'static str,
        /// What was wrong with it, with the path of the field.
        why: String,
    },
    /// The engine failed (a trap, a deadline, a refusal) or did not take the call.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Reserve was called for a pod that PreFilter did not see last.
    #[error("Reserve for pod {0} without its PreFilter")]
    NotPrepared(String),
}
