//! Why a session with the runtime failed.

use super::wire;

/// Why a session with the runtime failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading from or writing to the socket failed.
    #[error("the NRI socket failed")]
    Io(#[source] std::io::Error),
    /// The runtime sent bytes that are not NRI's framing.
    #[error("the runtime sent a malformed frame")]
    Wire(#[source] wire::WireError),
    /// The runtime sent a message that does not decode.
    #[error("the runtime sent a {0} that does not decode")]
    Decode(&'static str, #[source] prost::DecodeError),
    /// The runtime refused a call.
    #[error("the runtime refused {method}: {message}")]
    Refused {
        /// The runtime's method.
        method: &'static str,
        /// Its reason.
        message: String,
    },
    /// The runtime did not answer in time.
    #[error("the runtime did not answer {0} in time")]
    Timeout(&'static str),
    /// The connection closed while a call waited for its answer.
    #[error("the runtime closed the connection")]
    Closed,
    /// A task of the session failed.
    #[error("a task of the NRI session failed: {0}")]
    Task(String),
}
