//! One GPU as a plan fills it: its members and the memory bookkeeping the guard reads.

use smallvec::SmallVec;
use tandem_api::Gpu;

use crate::knowledge::{JobView, PartnerTerms};

/// A job on a GPU, resident or placed by the plan.
pub(super) struct Member<'a> {
    pub(super) id: &'a str,
    pub(super) view: JobView,
}

/// One GPU as the plan fills it.
pub(super) struct GpuState<'a> {
    pub(super) gpu: &'a Gpu,
    /// Index of its model in the planner's models.
    pub(super) model: usize,
    /// Residents first, then jobs placed by this plan.
    pub(super) members: SmallVec<[Member<'a>; 2]>,
    /// How many of `members` are residents.
    pub(super) residents: usize,
    /// Memory of the members whose memory is known.
    pub(super) used_mib: u64,
    /// A member whose memory is unknown: the GPU's free memory is unknown with it.
    pub(super) unknown_memory: Option<&'a str>,
    /// Time the current members save by sharing, in solo-time units.
    pub(super) time_saved: f64,
    /// Most members it may hold: the policy's cap for its model.
    pub(super) cap: usize,
    /// Its residents' kinds and terms from each other, when the caller kept them
    /// ([`super::Residents`]): what its group predicts while it holds its residents alone.
    pub(super) prepared: Option<Prepared<'a>>,
}

/// Where a GPU's residents' kinds and terms from each other are (see [`super::Residents`]).
#[derive(Clone, Copy)]
pub(super) enum Prepared<'a> {
    /// As the cluster view keeps them.
    Kept {
        kinds: &'a [u32],
        terms: &'a [PartnerTerms],
    },
    /// Worked out by the planner, for GPUs given with their residents alone: from this index
    /// on in its lists of them ([`super::forecast::Found`]).
    Found(usize),
}
impl GpuState<'_> {
    pub(super) fn capacity(&self) -> u64 {
        u64::from(self.gpu.spec.memory_mib)
    }

    /// Free memory; none while a member's memory is unknown.
    pub(super) fn free_mib(&self) -> u64 {
        if self.unknown_memory.is_some() {
            return 0;
        }
        self.capacity().saturating_sub(self.used_mib)
    }

    /// Memory the group holds, the whole GPU while a member's memory is unknown.
    pub(super) fn peak_mib(&self) -> u64 {
        if self.unknown_memory.is_some() {
            self.capacity()
        } else {
            self.used_mib
        }
    }

    pub(super) fn jobs(&self) -> usize {
        self.members.len()
    }

    pub(super) fn is_idle(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether a job seen as `view` could fit this GPU's memory were it empty (a job of
    /// unknown memory is taken to fit).
    pub(super) fn could_hold(&self, view: &JobView) -> bool {
        view.memory_mib
            .is_none_or(|mib| u64::from(mib) <= self.capacity())
    }
}

impl<'a> GpuState<'a> {
    /// Empties a GPU without residents and starts `id` alone on it.
    pub(super) fn reset_alone(&mut self, id: &'a str, view: JobView) {
        self.members.clear();
        self.used_mib = 0;
        self.unknown_memory = None;
        self.time_saved = 0.0;
        self.add(id, view);
    }

    /// Adds a member, keeping the memory bookkeeping.
    pub(super) fn add(&mut self, id: &'a str, view: JobView) {
        match view.memory_mib {
            Some(mib) => self.used_mib += u64::from(mib),
            None => {
                self.unknown_memory.get_or_insert(id);
            }
        }
        self.members.push(Member { id, view });
    }
}
