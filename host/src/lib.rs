//! The only crate of Tandem that touches wasmtime: it embeds the engine component and gives
//! adapters, the CLI and the simulator a typed Rust API over it.
//!
//! A [`Runtime`] holds one wasmtime `Engine` and one compiled, validated component. Each
//! [`Recommender`] it creates gets its own `Store` and instance, and every call into the guest
//! runs under a wall-clock deadline (epoch interruption) and a memory cap. A guest that loops,
//! allocates without bound or panics cannot take the host down: the call fails with a typed
//! [`Error`], and the instance is rebuilt from the last snapshot of its state before the error
//! is returned, so the next call is served as if the failed one had never been made.
//!
//! ```no_run
//! use tandem_api::Policy;
//! use tandem_host::{HostConfig, Runtime};
//!
//! let runtime = Runtime::from_file("tandem_engine_component.component.wasm".as_ref(), HostConfig::default())?;
//! let mut recommender = runtime.create(&Policy::default(), 42)?;
//! let answer = recommender.recommend(&[], &[])?;
//! assert!(answer.placements.is_empty());
//! # Ok::<(), tandem_host::Error>(())
//! ```

mod config;
mod error;
mod limits;
mod recommender;
mod runtime;
mod sandbox;

pub use config::HostConfig;
pub use error::{Error, Result};
pub use recommender::{JOURNAL_LIMIT, Recommender};
pub use runtime::{Runtime, SUPPORTED_WIT_VERSIONS};

/// Host bindings generated from the WIT the host supports.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/current",
        world: "plugin",
    });

    tandem_api::mirror_contract!(tandem::engine::types);
}
