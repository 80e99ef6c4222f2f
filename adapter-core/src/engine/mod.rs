//! The engine behind the core: how its calls run ([`executor`]: on a thread of its own behind a
//! bounded queue, in place when it is idle, or inline), what they work on ([`state`]: the
//! recommender and the cluster view's GPUs), and how they fail ([`error`]).

pub mod error;
pub mod executor;
pub mod state;

pub use error::{CallError, EngineError, EngineFailure, failed};
pub use executor::Engine;
pub use state::{EngineState, Handles, NodeScore, Placement, load_for_decisions};
