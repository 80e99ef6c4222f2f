//! The engine's saved state: versioned JSON, so an operator can read what the engine knows
//! and a newer engine can refuse (or migrate) an older format explicitly.

use serde::{Deserialize, Serialize};
use tandem_api::{EngineError, Policy};

use crate::finite::Finite;
use crate::knowledge::Knowledge;
use crate::{Result, validate};

/// Identifies the layout below; bump it when the layout changes.
const FORMAT: &str = "tandem-engine-state/1";

#[derive(Deserialize)]
struct Snapshot {
    format: String,
    policy: Policy,
    seed: u64,
    knowledge: Knowledge,
}

/// The same layout, borrowed, so saving does not copy the knowledge base.
#[derive(Serialize)]
struct SnapshotRef<'a> {
    format: &'a str,
    /// Informational: which engine wrote the state.
    engine_version: &'a str,
    policy: &'a Policy,
    seed: u64,
    knowledge: &'a Knowledge,
}

/// What a snapshot holds: everything of a recommender but its cluster view.
pub(crate) struct Saved {
    pub(crate) policy: Policy,
    pub(crate) seed: u64,
    pub(crate) knowledge: Knowledge,
}

/// The state as versioned JSON.
pub(crate) fn save(policy: &Policy, seed: u64, knowledge: &Knowledge) -> Vec<u8> {
    let snapshot = SnapshotRef {
        format: FORMAT,
        engine_version: crate::engine_version(),
        policy,
        seed,
        knowledge,
    };
    // Serializing plain structs with string keys cannot fail. Every float is written finite
    // (`finite`): serde_json writes a non-finite one as `null`, which `load` cannot read.
    serde_json::to_vec(&Finite(&snapshot)).unwrap_or_default()
}

/// Reads a state written by [`save`], checking its format and policy and rebuilding what is
/// not saved.
pub(crate) fn load(state: &[u8]) -> Result<Saved> {
    let snapshot: Snapshot = serde_json::from_slice(state).map_err(|e| {
        EngineError::InvalidInput(format!("state is not a Tandem engine snapshot: {e}"))
    })?;
    if snapshot.format != FORMAT {
        return Err(EngineError::InvalidInput(format!(
            "state has format `{}`, this engine reads `{FORMAT}`",
            snapshot.format
        )));
    }
    validate::policy(&snapshot.policy)?;
    let mut knowledge = snapshot.knowledge;
    knowledge.after_load()?;
    Ok(Saved {
        policy: snapshot.policy,
        seed: snapshot.seed,
        knowledge,
    })
}
