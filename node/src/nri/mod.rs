//! A plugin of the Node Resource Interface (NRI): the runtime (containerd ≥ 1.7, CRI-O ≥ 1.26)
//! asks it about every container before creating it, and applies the changes it answers.
//!
//! NRI's only plugin library is Go's (`containerd/nri`'s `pkg/stub`); the protocol under it is
//! small — two byte streams multiplexed over one Unix socket, ttrpc messages on each, a handful
//! of protobuf messages — so it is spoken here directly ([`wire`], [`api`]) rather than linking
//! a Go runtime into the node component. A session ([`serve`]):
//!
//! 1. the plugin calls the runtime's `RegisterPlugin` with its name and index;
//! 2. the runtime calls the plugin's `Configure`; the plugin subscribes to `CreateContainer`;
//! 3. the runtime calls `Synchronize` with the pods and containers it has ([`Handler::synchronize`]);
//! 4. for every container it creates, the runtime calls `CreateContainer` and applies the
//!    adjustment answered, or fails the creation with the error's text
//!    ([`Handler::create_container`]); the kubelet reports that text in an event;
//! 5. the session ends when the runtime closes the socket or calls `Shutdown`.

pub mod api;
mod session;
pub mod wire;

use std::fmt;

pub use session::{Ended, serve};

/// How the plugin introduces itself to the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The plugin's name: what the runtime's logs, events and the default validator's
    /// `required_plugins` call it.
    pub name: String,
    /// Its index (two digits): plugins are called in ascending order of index.
    pub index: String,
}

impl fmt::Display for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.index, self.name)
    }
}

/// What a plugin does with the runtime's calls.
pub trait Handler: Send + Sync + 'static {
    /// The runtime configured the plugin: its name and version.
    fn configured(&self, runtime: &str, version: &str);

    /// Every pod and container the runtime had when the plugin connected.
    fn synchronize(&self, pods: Vec<api::PodSandbox>, containers: Vec<api::Container>);

    /// `container` of `pod` is about to be created: the changes to make to it, or the reason to
    /// refuse it (the runtime then fails its creation with that text).
    fn create_container(
        &self,
        pod: api::PodSandbox,
        container: api::Container,
    ) -> impl Future<Output = Result<api::ContainerAdjustment, String>> + Send;
}

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
