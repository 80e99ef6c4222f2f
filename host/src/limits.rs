//! Per-store state the sandbox keeps: the memory cap, the panic message a guest logged, and the
//! `log` import.

use tandem_api::{LogLevel, PANIC_PREFIX};
use wasmtime::ResourceLimiter;

use crate::bindings;

/// The error `memory_growing` raises, so the trap is precise and recognisable.
#[derive(Debug, thiserror::Error)]
#[error("memory cap of {cap} bytes reached (the guest asked for {desired})")]
pub(crate) struct MemoryCapReached {
    pub(crate) cap: usize,
    pub(crate) desired: usize,
}

/// Data of one store.
pub(crate) struct StoreState {
    pub(crate) memory_cap: usize,
    /// Set when the guest tried to grow past the cap during the current call.
    pub(crate) memory_cap_hit: bool,
    /// The panic message the guest logged during the current call, if any.
    pub(crate) panic_message: Option<String>,
}

impl StoreState {
    pub(crate) fn new(memory_cap: usize) -> Self {
        Self {
            memory_cap,
            memory_cap_hit: false,
            panic_message: None,
        }
    }

    /// Forgets what an earlier call left behind.
    pub(crate) fn reset(&mut self) {
        self.memory_cap_hit = false;
        self.panic_message = None;
    }
}

/// Most table elements a guest may have; the engine needs a handful.
const MAX_TABLE_ELEMENTS: usize = 10_000;

impl ResourceLimiter for StoreState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_cap_hit = true;
            // Trap right here rather than let the guest's allocator abort somewhere else.
            return Err(MemoryCapReached {
                cap: self.memory_cap,
                desired,
            }
            .into());
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

impl bindings::tandem::engine::types::Host for StoreState {}

impl bindings::PluginImports for StoreState {
    fn log(&mut self, level: bindings::tandem::engine::types::LogLevel, msg: String) {
        let level = LogLevel::from(level);
        if level == LogLevel::Error
            && let Some(message) = msg.strip_prefix(PANIC_PREFIX)
        {
            self.panic_message = Some(message.to_owned());
        }
        match level {
            LogLevel::Trace => tracing::trace!(target: "tandem::engine", "{msg}"),
            LogLevel::Debug => tracing::debug!(target: "tandem::engine", "{msg}"),
            LogLevel::Info => tracing::info!(target: "tandem::engine", "{msg}"),
            LogLevel::Warn => tracing::warn!(target: "tandem::engine", "{msg}"),
            LogLevel::Error => tracing::error!(target: "tandem::engine", "{msg}"),
        }
    }
}
