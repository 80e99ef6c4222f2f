//! The limits every call into a component runs under.

use std::time::Duration;

/// Limits every call into a component runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// Wall-clock time one call may take before it is interrupted (at most 5 ms later).
    pub call_deadline: Duration,
    /// Most linear memory one instance may use, in bytes.
    pub memory_cap_bytes: usize,
}

impl HostConfig {
    /// Ten seconds: far above the engine's budget (100 ms for 1,000 jobs over 1,000 GPUs),
    /// far below what a scheduler would wait for.
    pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(10);
    /// 1 GiB: room for a knowledge base of millions of profiles, bounded all the same.
    pub const DEFAULT_MEMORY_CAP_BYTES: usize = 1 << 30;
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            call_deadline: Self::DEFAULT_CALL_DEADLINE,
            memory_cap_bytes: Self::DEFAULT_MEMORY_CAP_BYTES,
        }
    }
}
