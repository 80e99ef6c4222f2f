//! PreFilter's and Reserve's answers as the Go side reads them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use tandem_kube_common::decide::Verdict;

/// PreFilter's answer for one pod: everything Filter and Score need, so that they do not
/// cross into Rust once per node, in a compact binary form the Go side reads without
/// reflection ([`Prepared::encode`]; a JSON map of 500 nodes cost the scheduler more to decode
/// than Rust took to decide).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Whether Tandem manages the pod (it requests the managed GPU resource); when not, the
    /// rest is empty and the plugin stays out of the pod's way.
    pub managed: bool,
    /// The node table the verdicts follow: its generation (it changes whenever a node comes or
    /// goes) and its names, in order.
    pub generation: u64,
    /// The node table's names, sorted.
    pub names: Arc<[String]>,
    /// The verdict on each node of the table, in its order.
    pub verdicts: Vec<Verdict>,
}

/// The version of [`Prepared::encode`]'s layout (its first byte).
pub const PREPARED_FORMAT: u8 = 3;

/// Kinds of a node's verdict in [`Prepared::encode`].
const FITS: u8 = 0;
const FAILS: u8 = 1;
const UNRESOLVABLE: u8 = 2;

impl Prepared {
    /// The answer for a pod Tandem does not manage.
    pub(crate) fn unmanaged() -> Self {
        Self::default()
    }

    /// The verdicts as the Go side reads them (little-endian throughout):
    ///
    /// ```text
    /// u8 PREPARED_FORMAT, u8 managed (0: nothing follows)
    /// u64 generation of the node table (1 or more)
    /// u8 1 when the table follows, 0 when the caller holds this generation (`known_generation`)
    /// [u32 N, then N × (u32 length, UTF-8 name)]: the table's names, when it follows
    /// u32 V, then V × (u8 kind: 0 fits, 1 fails, 2 unresolvable; u8 score 0..=100;
    ///     u16 reason: index into the reasons, for kinds 1 and 2)
    /// u32 R, then R × (u32 length, UTF-8 reason): each distinct reason once
    /// ```
    pub fn encode(&self, known_generation: u64) -> Vec<u8> {
        let mut out = vec![PREPARED_FORMAT, u8::from(self.managed)];
        if !self.managed {
            return out;
        }
        out.extend_from_slice(&self.generation.to_le_bytes());
        let put_text = |out: &mut Vec<u8>, text: &str| {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        };
        if known_generation == self.generation {
            out.push(0);
        } else {
            out.push(1);
            out.extend_from_slice(&(self.names.len() as u32).to_le_bytes());
            for name in self.names.iter() {
                put_text(&mut out, name);
            }
        }
        out.extend_from_slice(&(self.verdicts.len() as u32).to_le_bytes());
        let mut reasons: Vec<&str> = Vec::new();
        for verdict in &self.verdicts {
            let (kind, score, reason) = match verdict {
                Verdict::Fits(score) => (FITS, (*score).min(100) as u8, None),
                Verdict::Fails(why) => (FAILS, 0, Some(why.as_ref())),
                Verdict::Unresolvable(why) => (UNRESOLVABLE, 0, Some(why.as_str())),
            };
            // Most failing nodes share one reason (passed over); a linear search over the
            // distinct ones is cheaper than hashing every reason.
            let index = reason.map_or(0, |why| {
                reasons.iter().position(|r| *r == why).unwrap_or_else(|| {
                    reasons.push(why);
                    reasons.len() - 1
                })
            });
            out.push(kind);
            out.push(score);
            out.extend_from_slice(&(index.min(usize::from(u16::MAX)) as u16).to_le_bytes());
        }
        out.extend_from_slice(&(reasons.len() as u32).to_le_bytes());
        for why in reasons {
            put_text(&mut out, why);
        }
        out
    }
}

/// Reserve's answer: the annotations the plugin's Bind puts on the pod's Binding, as the
/// extender writes them ([`tandem_kube_common::placement::Placements::annotations`]: the GPUs
/// chosen, and the memory the guard reserved on a shared GPU).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reserved {
    /// Annotation keys and values.
    pub annotations: BTreeMap<String, String>,
}

/// What Reserve made of the pod on the node the scheduler chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// Its GPUs are held, with the annotations Bind writes.
    Reserved(Reserved),
    /// The node cannot take it after all: why, for the pod's events (counted as `rejected`).
    Rejected(String),
}
