//! What a group on one GPU is predicted to do, and the memo of pair predictions that makes
//! judging many alike GPUs cheap.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use smallvec::SmallVec;

use super::state::Member;
use crate::interference;
use crate::knowledge::{GroupPrediction, JobView, Knowledge, PartnerTerms, Slowdowns};
use crate::learning::PairBelief;

/// Pair predictions already made, by the two jobs as the predictor sees them: on a cluster
/// view most GPUs hold instances of a few workloads, so judging one job against every state
/// repeats the same few pairs, and judging the next job repeats the residents' pairs. Valid as
/// long as what the engine knows does not change (the view drops it with its states).
#[derive(Default, Clone)]
pub(crate) struct PairMemo(RefCell<PairTable>);

impl std::fmt::Debug for PairMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PairMemo({} pairs)", self.0.borrow().len())
    }
}

/// Pairs a memo holds at most (about 2 MiB): past it the memo starts over. A view's residents
/// give far fewer distinct pairs; every new job class adds its pairs with them, so a memo kept
/// from call to call needs a bound.
const MEMO_PAIRS: usize = 1 << 14;

/// Predictions by the pair's key (see `JobView::prediction_key`).
type PairTable = HashMap<[u64; 10], PairBelief, BuildHasherDefault<KeyHasher>>;

/// A multiply-rotate hasher for keys that are already well-spread bit patterns (SipHash,
/// the default, costs as much as the prediction it would save).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl PairMemo {
    fn pair(&self, knowledge: &Knowledge, a: &JobView, b: &JobView) -> PairBelief {
        let key = {
            let (ka, kb) = (a.prediction_key(), b.prediction_key());
            let mut key = [0; 10];
            key[..5].copy_from_slice(&ka);
            key[5..].copy_from_slice(&kb);
            key
        };
        if let Some(&hit) = self.0.borrow().get(&key) {
            return hit;
        }
        let value = knowledge.predict_pair(a, b);
        let mut table = self.0.borrow_mut();
        if table.len() >= MEMO_PAIRS {
            table.clear();
        }
        table.insert(key, value);
        value
    }
}

/// A GPU's residents as its caller already resolved them on the planner's models (in the
/// residents' order), with what their group is predicted to do ([`residents_forecast`]): the
/// cluster view keeps both per state, so a planner over it predicts only the newcomer's pairs
/// with them for each job it judges.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Residents<'r> {
    /// Index of the GPU's model in the planner's models.
    pub(crate) model: usize,
    /// Each resident as the predictor sees it on the GPU's model.
    pub(crate) views: &'r [JobView],
    /// Each resident's kind: residents of one kind are predicted alike (the same
    /// `JobView::prediction_key` on the same model), so a newcomer's pairs with them are
    /// predicted once per kind.
    pub(crate) kinds: &'r [u32],
    /// Each resident's terms from the others ([`residents_forecast`]).
    pub(crate) terms: &'r [PartnerTerms],
    /// Time the residents save by sharing ([`residents_forecast`]).
    pub(crate) time_saved: f64,
}

/// What a GPU's residents, seen as `views`, are predicted to do sharing it: each one's terms
/// from the others, and the time they save by sharing (what a planner starts the GPU's state
/// with).
pub(crate) fn residents_forecast(
    knowledge: &Knowledge,
    views: &[JobView],
) -> (Vec<PartnerTerms>, f64) {
    let group: SmallVec<[&JobView; 4]> = views.iter().collect();
    let (terms, time_saved) = group_terms(&group, |a, b| knowledge.predict_pair(a, b));
    (terms.into_vec(), time_saved)
}

/// Each member's terms from the others in `group`, each ordered pair predicted by `pair`, and
/// the time the group saves by sharing.
fn group_terms(
    group: &[&JobView],
    pair: impl FnMut(&JobView, &JobView) -> PairBelief,
) -> (SmallVec<[PartnerTerms; 4]>, f64) {
    let terms = Knowledge::partner_terms(group, pair);
    let time_saved = interference::time_saved(&GroupPrediction::of(&terms).slowdowns);
    (terms, time_saved)
}

/// What `residents` alone are predicted to do sharing their GPU: each one's terms from the
/// others, and the time they save by sharing, as [`predict`] finds it (through `memo` when
/// the planner keeps one). A planner judges newcomers from the terms by [`join`].
fn residents_terms(
    knowledge: &Knowledge,
    memo: Option<&PairMemo>,
    residents: &[Member<'_>],
) -> (SmallVec<[PartnerTerms; 4]>, f64) {
    let views: SmallVec<[&JobView; 4]> = residents.iter().map(|m| &m.view).collect();
    group_terms(&views, |a, b| match memo {
        Some(memo) => memo.pair(knowledge, a, b),
        None => knowledge.predict_pair(a, b),
    })
}

/// The residents' kinds and terms a planner works out itself, for GPUs given with their
/// residents alone: residents predicted alike (the same `JobView::prediction_key`) are one
/// kind, numbered as first met, as the cluster view numbers the kinds it keeps.
#[derive(Default)]
pub(super) struct Found {
    numbers: HashMap<[u64; 5], u32, BuildHasherDefault<KeyHasher>>,
    kinds: Vec<u32>,
    terms: Vec<PartnerTerms>,
}

impl Found {
    /// Works out the kinds and terms of a GPU's `residents`: returns where they start in the
    /// lists ([`Found::of`]) and the time the residents save by sharing.
    pub(super) fn residents(
        &mut self,
        knowledge: &Knowledge,
        memo: Option<&PairMemo>,
        residents: &[Member<'_>],
    ) -> (usize, f64) {
        let from = self.kinds.len();
        for member in residents {
            let next = u32::try_from(self.numbers.len()).unwrap_or(u32::MAX);
            let kind = *self
                .numbers
                .entry(member.view.prediction_key())
                .or_insert(next);
            self.kinds.push(kind);
        }
        let (terms, time_saved) = residents_terms(knowledge, memo, residents);
        self.terms.extend(terms);
        (from, time_saved)
    }

    /// The kinds and terms of the `residents` residents found from index `from`.
    pub(super) fn of(&self, from: usize, residents: usize) -> (&[u32], &[PartnerTerms]) {
        let range = from..from + residents;
        (&self.kinds[range.clone()], &self.terms[range])
    }
}

/// A newcomer's pairs with each kind of resident ([`Residents::kinds`]), predicted once per
/// call that judges one job: (the resident next to the newcomer, the newcomer next to it). A
/// kind's key includes how the predictor sees the GPU model, and the job's view on that model
/// is predicted alike wherever the kind is: the kind alone is the key.
#[derive(Default)]
pub(super) struct NewcomerPairs(Vec<Option<(PairBelief, PairBelief)>>);

impl NewcomerPairs {
    fn get(
        &mut self,
        kind: u32,
        predict: impl FnOnce() -> (PairBelief, PairBelief),
    ) -> (PairBelief, PairBelief) {
        let slot = kind as usize;
        if self.0.len() <= slot {
            self.0.resize(slot + 1, None);
        }
        *self.0[slot].get_or_insert_with(predict)
    }
}

/// What `residents` (with their `terms` from each other and their `kinds`) and `joining`
/// are predicted to do sharing one GPU: [`predict`] with `joining` last, from the residents'
/// terms and the newcomer's pairs with them (through `pairs`) alone.
pub(super) fn join(
    knowledge: &Knowledge,
    memo: Option<&PairMemo>,
    residents: &[Member<'_>],
    terms: &[PartnerTerms],
    kinds: &[u32],
    joining: &JobView,
    pairs: &mut NewcomerPairs,
) -> GroupForecast {
    let pair = |a: &JobView, b: &JobView| match memo {
        Some(memo) => memo.pair(knowledge, a, b),
        None => knowledge.predict_pair(a, b),
    };
    let mut all: SmallVec<[PartnerTerms; 4]> = SmallVec::with_capacity(terms.len() + 1);
    let mut newcomer = PartnerTerms::default();
    for ((member, &terms), &kind) in residents.iter().zip(terms).zip(kinds) {
        let (beside, newcomer_beside) = pairs.get(kind, || {
            (pair(&member.view, joining), pair(joining, &member.view))
        });
        let mut terms = terms;
        terms.add(beside);
        newcomer.add(newcomer_beside);
        all.push(terms);
    }
    all.push(newcomer);
    let GroupPrediction {
        slowdowns,
        uncertainty,
        learned,
    } = GroupPrediction::of(&all);
    GroupForecast {
        time_saved: interference::time_saved(&slowdowns),
        slowdowns,
        uncertainty,
        learned,
    }
}

/// The predicted effect of a group sharing one GPU.
pub(super) struct GroupForecast {
    /// Each member's predicted slowdown, in the group's order.
    pub(super) slowdowns: Slowdowns,
    /// How unsure the prediction is, 0..=1 (see [`GroupPrediction::uncertainty`]).
    pub(super) uncertainty: f64,
    /// Whether any observed outcome informed it.
    pub(super) learned: bool,
    /// Time the group saves by sharing, in solo-time units.
    pub(super) time_saved: f64,
}

impl GroupForecast {
    /// The worst predicted slowdown in the group (0 for an empty one).
    pub(super) fn worst(&self) -> f64 {
        self.slowdowns.iter().fold(0.0_f64, |m, s| m.max(*s))
    }
}

/// What `members`, and `joining` with them when given, are predicted to do sharing one GPU;
/// through `memo` when the planner keeps one.
pub(super) fn predict(
    knowledge: &Knowledge,
    memo: Option<&PairMemo>,
    members: &[Member<'_>],
    joining: Option<&JobView>,
) -> GroupForecast {
    let mut views: SmallVec<[&JobView; 4]> = members.iter().map(|m| &m.view).collect();
    views.extend(joining);
    let GroupPrediction {
        slowdowns,
        uncertainty,
        learned,
    } = match memo {
        Some(memo) => Knowledge::predict_by(&views, |a, b| memo.pair(knowledge, a, b)),
        None => knowledge.predict(&views),
    };
    GroupForecast {
        time_saved: interference::time_saved(&slowdowns),
        slowdowns,
        uncertainty,
        learned,
    }
}
