//! What the engine knows: observed profiles (by keyed id), their clustering, and the
//! interference learned from outcomes.
//!
//! Job ids reaching the engine are opaque: hosts key real names (HMAC-SHA256 with a per-cluster
//! secret) before calling it, so a saved knowledge base names no job. Profiles and outcomes are
//! the only things stored per id, because later outcomes and queues refer to jobs by id; a job
//! that comes without telemetry is predicted from the outcomes of its id alone
//! ([`crate::workloads`]).
//!
//! The clustering is refit as profiles accumulate — whenever the number of points has grown by
//! [`REFIT_GROWTH`] since the last fit — over the seed points (the bundled Futurewei profiles
//! for a bootstrapped knowledge base) plus every observed profile.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tandem_api::{
    Assignment, ClusterInfo, EngineError, GpuSpec, Job, KnowledgeSummary, Outcome, PairInfo,
    Prediction, Profile,
};

use crate::Result;
use crate::clusters::Clusters;
use crate::features::{self, Features};
use crate::heterogeneity::{MemoryCell, Speeds};
use crate::interference;
use crate::learning::{PRIOR_STD, PairMatrix, ResidualModel};
use crate::workloads::Workloads;

/// Relative growth in points that triggers a refit of the clustering.
pub const REFIT_GROWTH: f64 = 0.1;

/// The bundled seed profiles: the Futurewei mini-ML workload set (see `data/README.md`).
const SEED_CSV: &str = include_str!("../data/futurewei_clustering_real_and_synthetic.csv");

/// Predicted slowdowns of a group's members; a GPU holds a few jobs, so they live on the stack.
pub(crate) type Slowdowns = smallvec::SmallVec<[f64; 4]>;

/// A job as the predictor sees it: its features and where it falls in the clustering when its
/// profile is known, its workload when outcomes named its id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct JobView {
    /// Normalized telemetry; `None` for a job with no known profile.
    pub(crate) features: Option<Features>,
    pub(crate) cluster: Option<u32>,
    /// How unsure the knowledge base is about the job, 0..=1: the distance-based uncertainty of
    /// its cluster assignment for a profiled job (1 without clusters), the evidence on its
    /// workload otherwise.
    pub(crate) assignment_uncertainty: f64,
    /// Index of the job's id among the workloads outcomes named.
    pub(crate) workload: Option<usize>,
    /// Memory the job uses, in MiB; `None` when unknown.
    pub(crate) memory_mib: Option<u32>,
}

impl JobView {
    /// What the predictor's answer for this job depends on, as bits (features, cluster,
    /// workload; not memory): two views with the same key are predicted alike, which the
    /// cluster view's states and pair memos rely on.
    pub(crate) fn prediction_key(&self) -> [u64; 5] {
        let [util, access, share] = self.features.map_or([u64::MAX; 3], |f| f.map(f64::to_bits));
        [
            util,
            access,
            share,
            self.cluster.map_or(u64::MAX, u64::from),
            self.workload.map_or(u64::MAX, |w| w as u64),
        ]
    }
}

/// Profiles, clusters and learned interference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Knowledge {
    pub(crate) profiles: BTreeMap<String, Profile>,
    /// Anonymous points the clustering starts from (no ids, no names).
    pub(crate) seed_points: Vec<Features>,
    pub(crate) clusters: Clusters,
    pub(crate) matrix: PairMatrix,
    pub(crate) residual: ResidualModel,
    /// Outcomes per id, for jobs without telemetry (absent from states saved before it existed).
    #[serde(default)]
    pub(crate) workloads: Workloads,
    pub(crate) outcomes: u64,
    /// Speeds reported per workload and GPU model (absent from states saved before 0.2.0).
    #[serde(default)]
    pub(crate) speeds: Speeds,
    /// Peaks the host reported for declared jobs; the memory model trains on them too.
    #[serde(default)]
    pub(crate) memory_rows: Vec<crate::memory::Row>,
    /// The memory model, a function of `memory_rows` (retrained on load, see
    /// [`Knowledge::after_load`]).
    #[serde(skip)]
    pub(crate) memory: MemoryCell,
}

/// The workload an id names: `<workload>~<instance>` is one instance of a recurring workload
/// (several may be queued or running at once, and ids must be unique in a request), any other
/// id is its own workload. Instances share what was learned about their workload: its observed
/// profile and its outcomes. Keyed ids are hexadecimal, so `~` never occurs in one.
pub(crate) fn workload_of(id: &str) -> &str {
    id.split_once('~').map_or(id, |(workload, _)| workload)
}

impl Knowledge {
    /// A knowledge base seeded with the bundled Futurewei profiles, clustered with `seed`.
    pub(crate) fn bootstrapped(seed: u64) -> Self {
        let mut knowledge = Self {
            seed_points: seed_points(),
            ..Self::default()
        };
        knowledge.refit(seed);
        knowledge
    }

    fn points(&self) -> Vec<Features> {
        let mut points = self.seed_points.clone();
        points.extend(self.profiles.values().map(features::of));
        points
    }

    fn refit(&mut self, seed: u64) {
        let points = self.points();
        self.clusters.fit(&points, seed);
    }

    /// Files a profile, refitting the clustering when enough new points arrived.
    pub(crate) fn observe_profile(&mut self, job: &str, profile: Profile, seed: u64) -> Assignment {
        let point = features::of(&profile);
        self.profiles.insert(workload_of(job).to_owned(), profile);
        let total = self.seed_points.len() + self.profiles.len();
        let fitted = self.clusters.fitted_points;
        if self.clusters.clusters.is_empty() || total as f64 >= fitted as f64 * (1.0 + REFIT_GROWTH)
        {
            self.refit(seed ^ total as u64);
        }
        let placed = self.clusters.place(&point);
        Assignment {
            cluster: placed.map_or(0, |p| p.cluster),
            uncertainty: placed.map_or(1.0, |p| p.uncertainty) as f32,
        }
    }

    /// Rebuilds what is not saved (the memory model) after deserializing.
    pub(crate) fn after_load(&mut self) -> Result<()> {
        self.memory = MemoryCell::retrained(&self.memory_rows)
            .map_err(|e| EngineError::InvalidInput(format!("state: {e}")))?;
        Ok(())
    }

    /// Learns a measured peak; the memory model retrains on it. On error nothing is learned.
    pub(crate) fn observe_memory(&mut self, row: crate::memory::Row) -> Result<()> {
        let mut rows = self.memory_rows.clone();
        rows.push(row);
        self.memory =
            MemoryCell::retrained(&rows).map_err(|e| EngineError::InvalidInput(e.to_string()))?;
        self.memory_rows = rows;
        Ok(())
    }

    /// How the predictor sees `job` on a GPU of `spec`: [`Knowledge::view_of`], with the memory
    /// the guard reserves on that model (`specs`: the other models of the request).
    pub(crate) fn view_on(&self, job: &Job, spec: &GpuSpec, specs: &[&GpuSpec]) -> JobView {
        let profile = job.profile.as_ref().or_else(|| self.profile(&job.id));
        JobView {
            memory_mib: self.memory_on(job, profile, spec, specs).reserved_mib,
            ..self.view_of(job)
        }
    }

    /// The profile observed under `job`, else under its workload (see [`workload_of`]).
    pub(crate) fn profile(&self, job: &str) -> Option<&Profile> {
        self.profiles
            .get(job)
            .or_else(|| self.profiles.get(workload_of(job)))
    }

    /// How the predictor sees a profile of an anonymous job.
    pub(crate) fn view(&self, profile: &Profile) -> JobView {
        let features = features::of(profile);
        let placed = self.clusters.place(&features);
        JobView {
            features: Some(features),
            cluster: placed.map(|p| p.cluster),
            assignment_uncertainty: placed.map_or(1.0, |p| p.uncertainty),
            workload: None,
            memory_mib: Some(profile.mem_used_mib),
        }
    }

    /// How the predictor sees `job`: from its own profile, else one observed under its id,
    /// else from the outcomes its id was named in (if any).
    pub(crate) fn view_of(&self, job: &Job) -> JobView {
        let workload = self.workloads.index(workload_of(&job.id));
        match job.profile.as_ref().or_else(|| self.profile(&job.id)) {
            Some(profile) => JobView {
                workload,
                ..self.view(profile)
            },
            None => JobView {
                features: None,
                cluster: None,
                assignment_uncertainty: self.workloads.uncertainty(workload),
                workload,
                memory_mib: None,
            },
        }
    }

    /// Whether two jobs were observed sharing a GPU of `gpu_model`, which is what lets a job
    /// of unknown memory share at all.
    pub(crate) fn shared(&self, a: &JobView, b: &JobView, gpu_model: &str) -> bool {
        self.workloads.shared(a.workload, b.workload, gpu_model)
    }

    /// Whether two jobs were observed sharing a GPU of any of `gpu_models`.
    pub(crate) fn shared_on_any<'m>(
        &self,
        a: &JobView,
        b: &JobView,
        gpu_models: impl Iterator<Item = &'m str>,
    ) -> bool {
        self.workloads
            .shared_on_any(a.workload, b.workload, gpu_models)
    }

    /// Folds a validated outcome into what the engine knows. Every outcome teaches the
    /// per-workload model; one whose jobs all have profiles also refines the cluster matrix
    /// and the residual model. Cannot fail once validated, so it is all or nothing.
    pub(crate) fn observe_outcome(&mut self, outcome: &Outcome) -> Result<()> {
        self.workloads.learn(outcome);
        self.outcomes += 1;
        let Some(profiles) = outcome
            .jobs
            .iter()
            .map(|job| self.profile(job))
            .collect::<Option<Vec<&Profile>>>()
        else {
            return Ok(());
        };
        let views: Vec<(JobView, Features)> = profiles
            .into_iter()
            .map(|p| (self.view(p), features::of(p)))
            .collect();
        let slowdowns: Vec<f64> = outcome
            .solo_s
            .iter()
            .zip(&outcome.colocated_s)
            .map(|(solo, colocated)| (colocated - solo) / solo)
            .collect();
        let partners = (views.len() - 1) as f64;
        for (i, (view, a)) in views.iter().enumerate() {
            for (j, (partner, b)) in views.iter().enumerate() {
                if i == j {
                    continue;
                }
                // With more than two jobs, each partner is charged an equal share: the
                // predictor adds pairwise slowdowns back up (see `predict`).
                let share = slowdowns[i] / partners;
                let prior = interference::prior_slowdowns_of(a, b);
                let (blend, _) = self.matrix.blend(view.cluster, partner.cluster, prior);
                self.residual.learn(a, b, share - blend);
                if let (Some(a), Some(b)) = (view.cluster, partner.cluster) {
                    self.matrix.push_slowdown(a, b, share);
                }
            }
        }
        if let [(a, _), (b, _)] = views.as_slice()
            && let (Some(ca), Some(cb)) = (a.cluster, b.cluster)
        {
            let solo: f64 = outcome.solo_s.iter().sum();
            let longest = outcome.colocated_s.iter().fold(0.0_f64, |m, t| m.max(*t));
            self.matrix.push_saving(ca, cb, (solo - longest) / solo);
        }
        Ok(())
    }

    /// Predicted slowdown of `a` next to `b`: `(mean, variance, no-evidence variance)`. From
    /// the profiles when both are known, else from the two workloads' outcomes.
    pub(crate) fn predict_pair(&self, a: &JobView, b: &JobView) -> (f64, f64, f64) {
        let (Some(fa), Some(fb)) = (&a.features, &b.features) else {
            return self.workloads.predict(a.workload, b.workload);
        };
        let prior = interference::prior_slowdowns_of(fa, fb);
        let (blend, blend_var) = self.matrix.blend(a.cluster, b.cluster, prior);
        let (residual, residual_var, residual_prior) = self.residual.predict_with_prior(fa, fb);
        let initial = PRIOR_STD * PRIOR_STD + residual_prior;
        (
            (blend + residual).max(0.0),
            blend_var + residual_var,
            initial,
        )
    }

    /// Predicted slowdowns of a group sharing one GPU (in its order) and the group's
    /// uncertainty (0..=1). Pairwise slowdowns add up for groups of three or more.
    pub(crate) fn predict(&self, group: &[&JobView]) -> (Slowdowns, f64) {
        Self::predict_by(group, |a, b| self.predict_pair(a, b))
    }

    /// [`Knowledge::predict`] with each ordered pair predicted by `pair` (which returns what
    /// [`Knowledge::predict_pair`] does: a memo may stand in for it).
    pub(crate) fn predict_by(
        group: &[&JobView],
        mut pair: impl FnMut(&JobView, &JobView) -> (f64, f64, f64),
    ) -> (Slowdowns, f64) {
        if group.len() < 2 {
            return (smallvec::smallvec![0.0; group.len()], 0.0);
        }
        let mut uncertainty: f64 = 0.0;
        let slowdowns = group
            .iter()
            .enumerate()
            .map(|(i, job)| {
                let (mut mean, mut var, mut initial) = (0.0, 0.0, 0.0);
                for (j, partner) in group.iter().enumerate() {
                    if i != j {
                        let (m, v, v0) = pair(job, partner);
                        mean += m;
                        var += v;
                        initial += v0;
                    }
                }
                uncertainty = uncertainty.max((var / initial).sqrt());
                mean
            })
            .collect();
        (slowdowns, uncertainty.min(1.0))
    }
}

impl Knowledge {
    /// The summary `describe` returns: clusters, the measured matrix with rankings, counts.
    pub(crate) fn describe(&self) -> KnowledgeSummary {
        let clusters = self
            .clusters
            .clusters
            .iter()
            .map(|c| ClusterInfo {
                id: c.id,
                gpu_util_pct: (c.centre[0] * 100.0) as f32,
                mem_access_pct: (c.centre[1] * 100.0) as f32,
                mem_share_pct: (c.centre[2] * 100.0) as f32,
                members: c.members,
                radius: c.radius as f32,
            })
            .collect();
        let mut pairs: Vec<PairInfo> = self
            .matrix
            .cells()
            .filter(|(_, cell)| cell.slowdown.count > 0)
            .map(|(&(of, next_to), cell)| {
                let saving = self
                    .matrix
                    .cell(of.min(next_to), of.max(next_to))
                    .map(|c| c.saving);
                PairInfo {
                    cluster: of,
                    partner: next_to,
                    observations: u32::try_from(cell.slowdown.count).unwrap_or(u32::MAX),
                    slowdown_pct: (cell.slowdown.mean * 100.0) as f32,
                    slowdown_std_pct: (cell.slowdown.variance().unwrap_or(0.0).sqrt() * 100.0)
                        as f32,
                    packing_saving_pct: saving
                        .filter(|s| s.count > 0)
                        .map(|s| (s.mean * 100.0) as f32),
                    rank: 0,
                }
            })
            .collect();
        // Relative ranking (JRS): best packing saving first, then least slowdown.
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_by(|&a, &b| {
            let saving = |i: usize| pairs[i].packing_saving_pct.unwrap_or(f32::NEG_INFINITY);
            saving(b)
                .total_cmp(&saving(a))
                .then(pairs[a].slowdown_pct.total_cmp(&pairs[b].slowdown_pct))
        });
        for (rank, i) in order.into_iter().enumerate() {
            pairs[i].rank = u32::try_from(rank + 1).unwrap_or(u32::MAX);
        }
        KnowledgeSummary {
            profiles: u32::try_from(self.profiles.len()).unwrap_or(u32::MAX),
            seed_points: u32::try_from(self.seed_points.len()).unwrap_or(u32::MAX),
            outcomes: u32::try_from(self.outcomes).unwrap_or(u32::MAX),
            residual_observations: u32::try_from(self.residual.observations).unwrap_or(u32::MAX),
            memory_rows: u32::try_from(self.memory.model().rows()).unwrap_or(u32::MAX),
            memory_margin_pct: (self.memory.model().margin() * 100.0) as f32,
            speed_workloads: u32::try_from(self.speeds.workloads()).unwrap_or(u32::MAX),
            clusters,
            pairs,
        }
    }

    /// Predicted effect of running `group` together (see [`Knowledge::predict`]). A group
    /// with a job of unknown memory is reported at the GPU's whole memory, the engine's
    /// stand-in for "unknown" everywhere; whether it may share is for the planner to decide.
    pub(crate) fn predict_group(&self, group: &[Job], gpu: &GpuSpec) -> Result<Prediction> {
        let views: Vec<JobView> = group
            .iter()
            .map(|job| self.view_on(job, gpu, &[gpu]))
            .collect();
        let memory: u64 = match views
            .iter()
            .map(|v| v.memory_mib.map(u64::from))
            .sum::<Option<u64>>()
        {
            Some(known) => known,
            None => u64::from(gpu.memory_mib),
        };
        let refs: Vec<&JobView> = views.iter().collect();
        let (slowdowns, uncertainty) = self.predict(&refs);
        if memory > u64::from(gpu.memory_mib) {
            return Err(EngineError::Infeasible(format!(
                "the group needs {memory} MiB, more than the {} MiB of a {}",
                gpu.memory_mib, gpu.model
            )));
        }
        Ok(Prediction {
            slowdown_pct: slowdowns.iter().map(|s| (s * 100.0) as f32).collect(),
            packing_saving_pct: (interference::packing_saving(&slowdowns) * 100.0) as f32,
            uncertainty: uncertainty as f32,
            peak_mem_mib: u32::try_from(memory).unwrap_or(u32::MAX),
        })
    }
}

/// Parses the bundled seed profiles (columns `MGUP`, `MGMAP`, `MGTSAMP`, in percent).
fn seed_points() -> Vec<Features> {
    let mut lines = SEED_CSV.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| header.iter().position(|h| h.trim() == name);
    let (Some(util), Some(memory), Some(access)) =
        (column("MGUP"), column("MGMAP"), column("MGTSAMP"))
    else {
        return Vec::new();
    };
    lines
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let value = |i: usize| {
                cells
                    .get(i)?
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
            };
            Some([
                value(util)? / 100.0,
                value(access)? / 100.0,
                value(memory)? / 100.0,
            ])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(util: f32, access: f32, mem: u32) -> Profile {
        Profile {
            gpu_util_pct: util,
            mem_access_pct: access,
            mem_used_mib: mem,
            gpu_model: "V100".into(),
        }
    }

    #[test]
    fn the_bundled_seed_is_read_and_clustered() {
        let kb = Knowledge::bootstrapped(1);
        assert_eq!(kb.seed_points.len(), 175);
        assert!(
            (2..=8).contains(&kb.clusters.clusters.len()),
            "{:?}",
            kb.clusters
        );
    }

    #[test]
    fn outcomes_sharpen_predictions_for_similar_pairs() {
        let mut kb = Knowledge::bootstrapped(1);
        kb.observe_profile("a", profile(90.0, 40.0, 4000), 1);
        kb.observe_profile("b", profile(85.0, 35.0, 5000), 1);
        let (a, b) = (
            kb.view(&profile(90.0, 40.0, 4000)),
            kb.view(&profile(85.0, 35.0, 5000)),
        );
        let (_, var_before, _) = kb.predict_pair(&a, &b);
        for _ in 0..10 {
            kb.observe_outcome(&Outcome {
                gpu_model: "V100".into(),
                jobs: vec!["a".into(), "b".into()],
                solo_s: vec![100.0, 100.0],
                colocated_s: vec![140.0, 130.0],
            })
            .unwrap();
        }
        let (mean, var_after, _) = kb.predict_pair(&a, &b);
        assert!((mean - 0.4).abs() < 0.1, "{mean}");
        assert!(var_after < var_before / 4.0);
        // A similar but unseen pair benefits too.
        let (c, d) = (
            kb.view(&profile(88.0, 38.0, 4500)),
            kb.view(&profile(86.0, 36.0, 4800)),
        );
        let (similar, _, _) = kb.predict_pair(&c, &d);
        assert!((similar - 0.4).abs() < 0.15, "{similar}");
    }

    #[test]
    fn an_outcome_with_a_job_of_no_profile_teaches_only_the_workload_model() {
        let mut kb = Knowledge::bootstrapped(1);
        kb.observe_profile("a", profile(50.0, 20.0, 1000), 1);
        let before = kb.clone();
        let outcome = Outcome {
            gpu_model: "V100".into(),
            jobs: vec!["a".into(), "unprofiled".into()],
            solo_s: vec![1.0, 1.0],
            colocated_s: vec![1.2, 1.5],
        };
        kb.observe_outcome(&outcome).unwrap();
        // The clusters know nothing of a job without telemetry: their matrix is untouched.
        assert_eq!(kb.matrix, before.matrix);
        assert_eq!(kb.residual, before.residual);
        let (a, b) = (
            kb.view_of(&Job::new("a")),
            kb.view_of(&Job::new("unprofiled")),
        );
        assert_eq!(b.memory_mib, None);
        assert!(kb.shared(&a, &b, "V100") && !kb.shared(&a, &b, "K80"));
        let (slowdown, _, _) = kb.predict_pair(&b, &a);
        assert!((slowdown - 0.5).abs() < 0.1, "{slowdown}");
    }
}
