//! The limits every call into a component runs under, and where compiled components are kept.

use std::path::PathBuf;
use std::time::Duration;

/// Limits every call into a component runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// Wall-clock time one call may take before it is interrupted (at most 5 ms later).
    pub call_deadline: Duration,
    /// Most linear memory one instance may use, in bytes.
    pub memory_cap_bytes: usize,
    /// Most native stack the WebAssembly of one call may use, in bytes: deep or endless
    /// recursion in the guest traps there ([`crate::Error::StackOverflow`]) instead of
    /// overflowing the host thread's stack.
    pub max_wasm_stack_bytes: usize,
    /// A directory where compiled components are kept, keyed by a hash of the component's
    /// bytes, the wasmtime version and the compilation settings (wasmtime's own cache): a
    /// start that finds the component compiled before loads it in milliseconds instead of
    /// compiling it for seconds. `None` compiles at every start. Needs the `compiled-cache`
    /// feature. What the directory holds is loaded as machine code, so it must be writable
    /// only by the user the host runs as. An unusable directory (cannot be created, a file
    /// that does not load) costs a compilation, never a start.
    pub compiled_cache: Option<PathBuf>,
}

impl HostConfig {
    /// Ten seconds: far above the engine's budget (100 ms for 1,000 jobs over 1,000 GPUs),
    /// far below what a scheduler would wait for.
    pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(10);
    /// 1 GiB: room for a knowledge base of millions of profiles, bounded all the same.
    pub const DEFAULT_MEMORY_CAP_BYTES: usize = 1 << 30;
    /// 512 KiB, wasmtime's own default, stated here so it is a limit a reader can see: the
    /// engine's test suite and benchmarks run under it, and it leaves most of a spawned host
    /// thread's 2 MiB stack to the host.
    pub const DEFAULT_MAX_WASM_STACK_BYTES: usize = 512 << 10;

    /// Where a long-running host keeps compiled components unless told otherwise:
    /// `$XDG_CACHE_HOME/tandem/compiled`, else `$HOME/.cache/tandem/compiled`; `None` without
    /// either (a shared directory such as `/tmp` is never a default: anyone who can write
    /// there could plant machine code).
    pub fn default_compiled_cache() -> Option<PathBuf> {
        let home_cache = || {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        };
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(home_cache)?;
        Some(base.join("tandem").join("compiled"))
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            call_deadline: Self::DEFAULT_CALL_DEADLINE,
            memory_cap_bytes: Self::DEFAULT_MEMORY_CAP_BYTES,
            max_wasm_stack_bytes: Self::DEFAULT_MAX_WASM_STACK_BYTES,
            compiled_cache: None,
        }
    }
}
