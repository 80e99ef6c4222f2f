//! The cluster view of WIT 0.4.0: GPUs under host-chosen handles, the changes hosts send, and
//! [`GpuTable`], the one implementation of what a change does, shared by the engine (its view)
//! and hosts (the mirror they replay after rebuilding an instance), so the two cannot disagree.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::{EngineError, Gpu, Job};

/// A GPU of the cluster view, under the handle the host gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewGpu {
    /// Compact handle, chosen by the host, unique among the view's GPUs; answers over the view
    /// are indexed by it. Keep handles dense (reuse freed ones): `score-all` answers with one
    /// entry per handle up to the largest.
    pub handle: u32,
    /// The GPU, its residents included.
    pub gpu: Gpu,
}

/// A job that started on a GPU of the view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    /// Handle of the GPU.
    pub gpu: u32,
    /// The job; it becomes one of the GPU's residents.
    pub job: Job,
}

/// A job that left a GPU of the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unbinding {
    /// Handle of the GPU.
    pub gpu: u32,
    /// Id of the resident that left (one of them, if the id is there several times).
    pub job: String,
}

/// One change to the cluster view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterChange {
    /// A GPU appeared, or changed (spec or residents): its whole record, under its handle.
    SetGpu(ViewGpu),
    /// The GPU with this handle is gone.
    RemoveGpu(u32),
    /// A job started on a GPU.
    Bind(Binding),
    /// A job left a GPU (finished, deleted, or a tentative placement undone).
    Unbind(Unbinding),
    /// Every GPU is gone (a host about to describe the cluster anew).
    Clear,
}

/// What the cluster view holds after an `update-cluster`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSummary {
    /// GPUs in the view.
    pub gpus: u32,
    /// Nodes they belong to.
    pub nodes: u32,
    /// Distinct GPU states among them (model, memory and residents as the engine sees them):
    /// what a decision over the whole view costs.
    pub states: u32,
    /// One more than the largest handle in use: the length of a `score-all` answer.
    pub handles: u32,
}

/// Which GPU of a node a job should go to (the answer of `choose-gpu`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// Handle of the chosen GPU: the best-scored one the job fits; absent when none fits.
    pub gpu: Option<u32>,
    /// Its score, 0..=100 (0 when none fits).
    pub score: u8,
    /// Why no GPU of the node fits (empty when one does), for a person to read.
    pub reason: String,
}

/// GPUs by handle: the state a list of [`ClusterChange`]s acts on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuTable {
    slots: Vec<Option<Gpu>>,
    /// Handle of each GPU id, so an id names one GPU only.
    ids: HashMap<String, u32>,
    len: usize,
}

impl GpuTable {
    /// The GPU under `handle`, if any.
    pub fn get(&self, handle: u32) -> Option<&Gpu> {
        self.slots.get(handle as usize).and_then(Option::as_ref)
    }

    /// GPUs in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds no GPU.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One more than the largest handle in use.
    pub fn handles(&self) -> u32 {
        self.slots
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |last| last as u32 + 1)
    }

    /// Every GPU with its handle, by increasing handle.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Gpu)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(h, gpu)| Some((h as u32, gpu.as_ref()?)))
    }

    /// The changes that describe this table from scratch: `clear`, then every GPU.
    pub fn replay(&self) -> Vec<ClusterChange> {
        std::iter::once(ClusterChange::Clear)
            .chain(self.iter().map(|(handle, gpu)| {
                ClusterChange::SetGpu(ViewGpu {
                    handle,
                    gpu: gpu.clone(),
                })
            }))
            .collect()
    }

    /// Applies `changes` in order, all or nothing (see the WIT's `update-cluster`), and returns
    /// the handles whose GPU changed (appeared, changed or went), each once, in increasing
    /// order; after a `clear`, every handle that held a GPU before it is among them.
    pub fn apply(&mut self, changes: &[ClusterChange]) -> Result<Vec<u32>, EngineError> {
        // Work on an overlay of the slots touched, so a failing change leaves the table as it
        // was without copying it.
        let mut overlay = Overlay {
            base: self,
            cleared: false,
            slots: BTreeMap::new(),
            ids: HashMap::new(),
        };
        for (i, change) in changes.iter().enumerate() {
            overlay
                .apply(change)
                .map_err(|why| EngineError::InvalidInput(format!("changes[{i}]: {why}")))?;
        }
        let Overlay {
            cleared,
            slots,
            ids,
            ..
        } = overlay;
        let mut touched: Vec<u32> = slots.keys().copied().collect();
        if cleared {
            touched.extend(self.iter().map(|(h, _)| h));
            touched.sort_unstable();
            touched.dedup();
            self.slots.clear();
            self.ids.clear();
            self.len = 0;
        }
        for (handle, gpu) in slots {
            let slot = handle as usize;
            if self.slots.len() <= slot {
                self.slots.resize(slot + 1, None);
            }
            let had = self.slots[slot].is_some();
            self.len = self.len + usize::from(gpu.is_some()) - usize::from(had);
            self.slots[slot] = gpu;
        }
        for (id, handle) in ids {
            match handle {
                Some(handle) => self.ids.insert(id, handle),
                None => self.ids.remove(&id),
            };
        }
        while self.slots.last().is_some_and(Option::is_none) {
            self.slots.pop();
        }
        Ok(touched)
    }
}

/// Changes applied so far over a table that is left untouched until all of them succeeded.
struct Overlay<'a> {
    base: &'a GpuTable,
    /// Whether a `clear` came: the base's GPUs no longer count.
    cleared: bool,
    /// Slots changed, with their new content.
    slots: BTreeMap<u32, Option<Gpu>>,
    /// GPU ids whose handle changed (`None`: no longer used).
    ids: HashMap<String, Option<u32>>,
}

impl Overlay<'_> {
    fn get(&self, handle: u32) -> Option<&Gpu> {
        match self.slots.get(&handle) {
            Some(slot) => slot.as_ref(),
            None if self.cleared => None,
            None => self.base.get(handle),
        }
    }

    fn id_handle(&self, id: &str) -> Option<u32> {
        match self.ids.get(id) {
            Some(handle) => *handle,
            None if self.cleared => None,
            None => self.base.ids.get(id).copied(),
        }
    }

    /// The GPU under `handle`, to change: copied into the overlay on first touch.
    fn get_mut(&mut self, handle: u32) -> Result<&mut Gpu, String> {
        if !self.slots.contains_key(&handle) {
            let gpu = self.get(handle).cloned();
            self.slots.insert(handle, gpu);
        }
        self.slots
            .get_mut(&handle)
            .and_then(Option::as_mut)
            .ok_or_else(|| format!("no GPU has handle {handle}"))
    }

    fn apply(&mut self, change: &ClusterChange) -> Result<(), String> {
        match change {
            ClusterChange::Clear => {
                self.cleared = true;
                self.slots.clear();
                self.ids.clear();
            }
            ClusterChange::SetGpu(ViewGpu { handle, gpu }) => {
                if let Some(other) = self.id_handle(&gpu.id)
                    && other != *handle
                {
                    return Err(format!(
                        "set-gpu: GPU `{}` already has handle {other}, not {handle}",
                        gpu.id
                    ));
                }
                if let Some(old) = self.get(*handle).map(|g| g.id.clone())
                    && old != gpu.id
                {
                    self.ids.insert(old, None);
                }
                self.ids.insert(gpu.id.clone(), Some(*handle));
                self.slots.insert(*handle, Some(gpu.clone()));
            }
            ClusterChange::RemoveGpu(handle) => {
                let gpu = self
                    .get(*handle)
                    .ok_or_else(|| format!("remove-gpu: no GPU has handle {handle}"))?;
                let id = gpu.id.clone();
                self.ids.insert(id, None);
                self.slots.insert(*handle, None);
            }
            ClusterChange::Bind(Binding { gpu, job }) => {
                self.get_mut(*gpu)
                    .map_err(|why| format!("bind: {why}"))?
                    .residents
                    .push(job.clone());
            }
            ClusterChange::Unbind(Unbinding { gpu, job }) => {
                let residents = &mut self
                    .get_mut(*gpu)
                    .map_err(|why| format!("unbind: {why}"))?
                    .residents;
                let at = residents
                    .iter()
                    .rposition(|r| &r.id == job)
                    .ok_or_else(|| format!("unbind: `{job}` does not run on GPU {gpu}"))?;
                residents.remove(at);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuSpec;

    fn gpu(id: &str) -> Gpu {
        Gpu {
            id: id.into(),
            node: id.split('/').next().unwrap_or_default().into(),
            spec: GpuSpec::new("V100", 16_384),
            residents: Vec::new(),
        }
    }

    fn set(handle: u32, id: &str) -> ClusterChange {
        ClusterChange::SetGpu(ViewGpu {
            handle,
            gpu: gpu(id),
        })
    }

    #[test]
    fn changes_apply_in_order_and_report_what_they_touched() {
        let mut table = GpuTable::default();
        let touched = table.apply(&[set(0, "a/0"), set(2, "a/1")]).unwrap();
        assert_eq!(touched, [0, 2]);
        assert_eq!((table.len(), table.handles()), (2, 3));
        let bind = ClusterChange::Bind(Binding {
            gpu: 2,
            job: Job::new("j"),
        });
        assert_eq!(table.apply(&[bind]).unwrap(), [2]);
        assert_eq!(table.get(2).unwrap().residents[0].id, "j");
        let unbind = ClusterChange::Unbind(Unbinding {
            gpu: 2,
            job: "j".into(),
        });
        table.apply(&[unbind, ClusterChange::RemoveGpu(2)]).unwrap();
        assert_eq!((table.len(), table.handles()), (1, 1));
    }

    #[test]
    fn a_failing_change_leaves_the_table_as_it_was_and_is_named() {
        let mut table = GpuTable::default();
        table.apply(&[set(0, "a/0")]).unwrap();
        let before = table.clone();
        let bad = [
            ClusterChange::Bind(Binding {
                gpu: 0,
                job: Job::new("j"),
            }),
            ClusterChange::Unbind(Unbinding {
                gpu: 0,
                job: "other".into(),
            }),
        ];
        let error = table.apply(&bad).unwrap_err().to_string();
        assert!(
            error.contains("changes[1]") && error.contains("`other`"),
            "{error}"
        );
        assert_eq!(table, before);
        let error = table
            .apply(&[ClusterChange::RemoveGpu(7)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("handle 7"), "{error}");
        // One id, one handle.
        let error = table.apply(&[set(1, "a/0")]).unwrap_err().to_string();
        assert!(error.contains("already has handle 0"), "{error}");
        assert_eq!(table, before);
    }

    #[test]
    fn clear_then_replay_rebuilds_the_same_table() {
        let mut table = GpuTable::default();
        table
            .apply(&[
                set(0, "a/0"),
                set(1, "a/1"),
                ClusterChange::Bind(Binding {
                    gpu: 1,
                    job: Job::new("j"),
                }),
            ])
            .unwrap();
        let mut copy = GpuTable::default();
        copy.apply(&[set(5, "z/0")]).unwrap();
        let touched = copy.apply(&table.replay()).unwrap();
        assert_eq!(touched, [0, 1, 5]);
        assert_eq!(copy, table);
        // An id freed by clear or remove can be used again under another handle.
        copy.apply(&[ClusterChange::RemoveGpu(0), set(3, "a/0")])
            .unwrap();
        assert_eq!(copy.get(3).unwrap().id, "a/0");
    }
}
