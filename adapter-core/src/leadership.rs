//! Who may write the knowledge base.
//!
//! Every replica of an adapter answers its scheduler from its own engine; only the leader
//! accepts observations and writes them to the store. How leadership is won is the front-end's
//! business (a Lease in Kubernetes; Slurm has one controller, so its adapter is always alone):
//! this is what the core reads.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// Who leads, as this replica knows it.
#[derive(Debug, Default)]
pub struct Leadership {
    leading: AtomicBool,
    holder: Mutex<Option<String>>,
}

impl Leadership {
    /// Leadership that is always this replica's (a single replica, or tests).
    pub fn alone() -> Self {
        Self {
            leading: AtomicBool::new(true),
            holder: Mutex::new(None),
        }
    }

    /// Whether this replica leads.
    pub fn is_leader(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// The current leader, if known.
    pub fn holder(&self) -> Option<String> {
        self.holder.lock().clone()
    }

    /// Records who leads now; returns whether this replica's leadership changed.
    pub fn set(&self, leading: bool, holder: Option<String>) -> bool {
        *self.holder.lock() = holder;
        self.leading.swap(leading, Ordering::AcqRel) != leading
    }
}
