//! What every instance of one compiled component shares, and how a trapped call is named:
//! the layer [`Runtime`](crate::Runtime) and [`Recommender`](crate::Recommender) both build on.

use std::time::Duration;

use wasmtime::{Engine, Store};

use crate::bindings::{Plugin, PluginPre};
use crate::config::HostConfig;
use crate::limits::{MemoryCapReached, StoreState};
use crate::{Error, Result};

/// How often the epoch advances: the granularity of call deadlines.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// What every instance of one component shares.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) pre: PluginPre<StoreState>,
    pub(crate) config: HostConfig,
}

impl Shared {
    /// Epoch ticks a call may run for.
    pub(crate) fn deadline_ticks(&self) -> u64 {
        deadline_ticks(self.config.call_deadline)
    }

    /// A fresh store and instance, under the configured limits.
    pub(crate) fn instantiate(&self) -> Result<(Store<StoreState>, Plugin)> {
        let mut store = Store::new(&self.engine, StoreState::new(self.config.memory_cap_bytes));
        store.limiter(|state| state);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(self.deadline_ticks());
        let plugin = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| Error::wasmtime("instantiate", e))?;
        Ok((store, plugin))
    }
}

/// Epoch ticks to allow for `deadline`: the whole ticks covering it, plus one. The ticker runs
/// in its own phase, so the first tick after a call starts may come at once; the extra tick
/// makes sure a call is never interrupted before its deadline (it is interrupted at most one
/// tick, 5 ms, after it).
fn deadline_ticks(deadline: Duration) -> u64 {
    let ticks = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

/// The contract's Rust types as the generated bindings' types.
pub(crate) fn to_wit<A: Clone + Into<W>, W>(items: &[A]) -> Vec<W> {
    items.iter().cloned().map(Into::into).collect()
}

/// Names what went wrong in a call that trapped.
pub(crate) fn classify(
    call: &'static str,
    trap: wasmtime::Error,
    shared: &Shared,
    state: &StoreState,
) -> Error {
    if state.memory_cap_hit || trap.downcast_ref::<MemoryCapReached>().is_some() {
        return Error::MemoryLimit {
            call,
            cap_bytes: shared.config.memory_cap_bytes,
        };
    }
    match trap.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => {
            return Error::DeadlineExceeded {
                call,
                deadline: shared.config.call_deadline,
            };
        }
        Some(wasmtime::Trap::StackOverflow) => {
            return Error::StackOverflow {
                call,
                limit_bytes: shared.config.max_wasm_stack_bytes,
            };
        }
        _ => {}
    }
    if let Some(message) = &state.panic_message {
        return Error::Panicked {
            call,
            message: message.clone(),
        };
    }
    Error::Trapped {
        call,
        source: trap.into_boxed_dyn_error(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_cover_whole_ticks_and_one_more() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(Duration::from_millis(1)), 2);
        assert_eq!(deadline_ticks(Duration::from_millis(12)), 4);
        assert_eq!(deadline_ticks(Duration::MAX), u64::MAX);
    }
}
