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
mod error;
mod handler;
mod session;
pub mod wire;

pub use error::Error;
pub use handler::{Deadline, Handler, Registration};
pub use session::{Ended, serve};
