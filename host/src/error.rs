//! Everything that can go wrong between the host and a component.

use std::path::PathBuf;
use std::time::Duration;

use tandem_api::EngineError;

/// A boxed error from wasmtime (whose own error type does not implement `std::error::Error`).
pub type WasmtimeError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of a host operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why loading a component or calling into it failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component file could not be read.
    #[error("cannot read component {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A compiled-component cache was asked of a host built without one.
    #[error(
        "a compiled-component cache ({directory}) was configured, but this build has none (the `compiled-cache` feature of tandem-host)"
    )]
    NoCompiledCache {
        /// The directory asked for.
        directory: PathBuf,
    },
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly component: the file does not start with the wasm magic bytes")]
    NotWasm,
    /// The bytes are a core WebAssembly module, not a component.
    #[error(
        "this is a core WebAssembly module, not a component: build the engine with `cargo xtask component`"
    )]
    CoreModule,
    /// The component does not export the Tandem engine interface at all.
    #[error(
        "component does not export `tandem:engine/engine` (it exports: {exports}); is it a Tandem engine?"
    )]
    NotAnEngine {
        /// The names it does export.
        exports: String,
    },
    /// The component implements a WIT version this host does not load.
    #[error(
        "component implements tandem:engine@{found}, but this host loads only {supported}; rebuild the component or upgrade the host"
    )]
    UnsupportedVersion {
        /// The version the component exports.
        found: String,
        /// The versions this host loads, comma-separated.
        supported: String,
    },
    /// The component imports something the sandbox does not provide (WASI, for example).
    #[error(
        "component imports `{name}`, which the Tandem sandbox does not provide (it provides only `log`)"
    )]
    ForbiddenImport {
        /// The import's name.
        name: String,
    },
    /// wasmtime rejected the component while compiling, type-checking or instantiating it.
    #[error("cannot {action} the component")]
    Wasmtime {
        /// What the host was doing.
        action: &'static str,
        /// wasmtime's error.
        #[source]
        source: WasmtimeError,
    },
    /// The engine answered with an error value (bad input, unknown job, infeasible request).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The call ran past its deadline and was interrupted; the instance was rebuilt.
    #[error("engine call `{call}` exceeded its deadline of {deadline:?} and was interrupted")]
    DeadlineExceeded {
        /// The WIT function called.
        call: &'static str,
        /// The deadline in force.
        deadline: Duration,
    },
    /// The guest tried to grow its memory past the cap; the instance was rebuilt.
    #[error("engine call `{call}` tried to use more than the memory cap of {cap_bytes} bytes")]
    MemoryLimit {
        /// The WIT function called.
        call: &'static str,
        /// The cap in force.
        cap_bytes: usize,
    },
    /// The guest's call stack outgrew its limit (deep or endless recursion); the instance was
    /// rebuilt.
    #[error("engine call `{call}` overflowed its stack of {limit_bytes} bytes")]
    StackOverflow {
        /// The WIT function called.
        call: &'static str,
        /// The limit in force ([`crate::HostConfig::max_wasm_stack_bytes`]).
        limit_bytes: usize,
    },
    /// The guest panicked; the instance was rebuilt.
    #[error("engine call `{call}` panicked: {message}")]
    Panicked {
        /// The WIT function called.
        call: &'static str,
        /// The panic message the guest logged before it aborted.
        message: String,
    },
    /// The guest trapped for another reason; the instance was rebuilt.
    #[error("engine call `{call}` trapped")]
    Trapped {
        /// The WIT function called.
        call: &'static str,
        /// The trap.
        #[source]
        source: WasmtimeError,
    },
    /// After a trap, the instance could not be rebuilt from its last snapshot.
    #[error("could not rebuild the engine instance after `{call}` failed")]
    Restore {
        /// The WIT function whose failure forced the rebuild.
        call: &'static str,
        /// Why the rebuild failed.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    pub(crate) fn wasmtime(action: &'static str, source: wasmtime::Error) -> Self {
        Error::Wasmtime {
            action,
            source: source.into_boxed_dyn_error(),
        }
    }

    /// Whether the guest misbehaved (deadline, memory, stack, panic, trap) rather than
    /// answered.
    pub fn is_guest_fault(&self) -> bool {
        matches!(
            self,
            Error::DeadlineExceeded { .. }
                | Error::MemoryLimit { .. }
                | Error::StackOverflow { .. }
                | Error::Panicked { .. }
                | Error::Trapped { .. }
                | Error::Restore { .. }
        )
    }
}
