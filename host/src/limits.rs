//! Per-store state the sandbox keeps: the memory cap, the panic message a guest logged, and the
//! `log` import, bounded so a guest cannot flood the host's log.

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
    /// Lines the guest logged during the current call.
    pub(crate) lines_logged: u32,
}

/// Lines one call may log; the rest are dropped, with one warning saying so.
pub(crate) const LOG_LINES_PER_CALL: u32 = 64;

/// Bytes of a logged line (or panic message) the host keeps; the rest is cut.
pub(crate) const LOG_LINE_BYTES: usize = 4 << 10;

/// `line` cut to [`LOG_LINE_BYTES`] at a character boundary.
fn bounded(line: &str) -> &str {
    if line.len() <= LOG_LINE_BYTES {
        return line;
    }
    let mut end = LOG_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

impl StoreState {
    pub(crate) fn new(memory_cap: usize) -> Self {
        Self {
            memory_cap,
            memory_cap_hit: false,
            panic_message: None,
            lines_logged: 0,
        }
    }

    /// Counts a line the guest logs; whether it is under this call's cap (the first line over
    /// it is replaced by a warning).
    fn admit_line(&mut self) -> bool {
        self.lines_logged = self.lines_logged.saturating_add(1);
        if self.lines_logged == LOG_LINES_PER_CALL + 1 {
            tracing::warn!(
                target: "tandem::engine",
                "the engine logged more than {LOG_LINES_PER_CALL} lines in one call; the rest of this call's are dropped"
            );
        }
        self.lines_logged <= LOG_LINES_PER_CALL
    }

    /// Forgets what an earlier call left behind.
    pub(crate) fn reset(&mut self) {
        self.memory_cap_hit = false;
        self.panic_message = None;
        self.lines_logged = 0;
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
        let msg = bounded(&msg);
        // A panic's message is kept past the line cap: it names the error of the call.
        if level == LogLevel::Error
            && let Some(message) = msg.strip_prefix(PANIC_PREFIX)
        {
            self.panic_message = Some(message.to_owned());
        }
        if !self.admit_line() {
            return;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::PluginImports;
    use crate::bindings::tandem::engine::types::LogLevel as WitLevel;

    #[test]
    fn lines_are_cut_at_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(LOG_LINE_BYTES);
        let cut = bounded(&long);
        assert!(cut.len() <= LOG_LINE_BYTES && cut.len() > LOG_LINE_BYTES - 2);
        assert!(cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_call_logs_a_bounded_number_of_lines_and_keeps_its_panic_message() {
        let mut state = StoreState::new(1 << 20);
        let admitted = (0..1_000).filter(|_| state.admit_line()).count();
        assert_eq!(admitted, LOG_LINES_PER_CALL as usize);
        state.log(WitLevel::Info, "x".repeat(1 << 16));
        assert_eq!(state.lines_logged, 1_001);
        let panic = format!("{PANIC_PREFIX}{}", "p".repeat(1 << 16));
        state.log(WitLevel::Error, panic);
        let kept = state.panic_message.clone().unwrap();
        assert!(
            kept.len() <= LOG_LINE_BYTES && kept.starts_with('p'),
            "{}",
            kept.len()
        );
        state.reset();
        assert_eq!((state.lines_logged, state.panic_message), (0, None));
    }
}
