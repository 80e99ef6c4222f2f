//! What the engine knows: observed profiles (by keyed id), their clustering, the interference
//! learned from outcomes, and what differs between GPU models.
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
//!
//! [`Knowledge`] is defined, saved and taught here; its other methods are split by concern
//! into submodules that only add to it: [`predict`] (how the predictor sees a job, and
//! slowdowns), [`estimate`] (a job's memory, speed and cost on each GPU model) and
//! [`describe`]. The parts it is made of ([`job`], [`speeds`], [`memory_cell`], [`seed`],
//! [`recency`]) know nothing of it.
//!
//! A job is forgotten ([`Knowledge::forget_stalest`]) with what is only about it: its profile,
//! its speeds, and the outcomes' measurements of each pair it was in (a pair is about both of
//! its jobs, and kept only while both are). What was learned across jobs stays: the clustering
//! (not refit), the interference between clusters and its residual model, the memory model,
//! and the count of outcomes.

mod describe;
mod estimate;
mod job;
mod memory_cell;
mod predict;
mod recency;
mod seed;
mod speeds;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use tandem_api::{Assignment, EngineError, Outcome, Profile};

pub(crate) use self::job::{GroupPrediction, JobView, PartnerTerms, Slowdowns};
use self::memory_cell::MemoryCell;
use self::recency::Recency;
use self::speeds::Speeds;
use crate::Result;
use crate::clusters::Clusters;
use crate::features::{self, Features};
use crate::identity::workload_of;
use crate::interference;
use crate::learning::{PairMatrix, ResidualModel};
use crate::memory::Row;
use crate::workloads::Workloads;

/// Relative growth in points that triggers a refit of the clustering.
pub const REFIT_GROWTH: f64 = 0.1;

/// Most reported peaks the memory model keeps beside the bundled ones: every one is a row of
/// every retraining, and retraining runs on a host's thread.
pub const MAX_REPORTED_MEMORY_ROWS: usize = 1_000;

/// Profiles, clusters and learned interference. Its fields are its own: the rest of the engine
/// asks through methods, and only this module and its submodules touch them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Knowledge {
    profiles: BTreeMap<String, Profile>,
    /// Anonymous points the clustering starts from (no ids, no names).
    seed_points: Vec<Features>,
    clusters: Clusters,
    matrix: PairMatrix,
    residual: ResidualModel,
    /// Outcomes per id, for jobs without telemetry (absent from states saved before it existed).
    #[serde(default)]
    workloads: Workloads,
    outcomes: u64,
    /// Speeds reported per workload and GPU model (absent from states saved before 0.2.0).
    #[serde(default)]
    speeds: Speeds,
    /// Peaks the host reported for declared jobs; the memory model trains on them too.
    #[serde(default)]
    memory_rows: Vec<Row>,
    /// Observations that named a job, numbered so far (absent from states saved before 0.5.0).
    #[serde(default)]
    observations: u64,
    /// The number of the last observation that named each job (absent before 0.5.0).
    #[serde(default)]
    last_observed: Recency,
    /// The memory model, a function of `memory_rows` (retrained on load, see
    /// [`Knowledge::after_load`]).
    #[serde(skip)]
    memory: MemoryCell,
}

impl Knowledge {
    /// A knowledge base seeded with the bundled Futurewei profiles, clustered with `seed`.
    pub(crate) fn bootstrapped(seed: u64) -> Self {
        let mut knowledge = Self {
            seed_points: seed::seed_points(),
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

    /// Numbers one more observation, naming `jobs` (by their workloads).
    fn observed<'j>(&mut self, jobs: impl IntoIterator<Item = &'j str>) {
        self.observations = self.observations.saturating_add(1);
        for job in jobs {
            self.last_observed
                .touch(workload_of(job), self.observations);
        }
    }

    /// Every job the knowledge base holds something of, by id: the workloads of its profiles,
    /// speeds and outcomes.
    fn jobs(&self) -> BTreeSet<&str> {
        let mut jobs: BTreeSet<&str> = self.profiles.keys().map(String::as_str).collect();
        jobs.extend(self.speeds.jobs());
        jobs.extend(self.workloads.ids());
        jobs
    }

    /// Whether every job the knowledge base holds, and no other, has an observation number:
    /// what saving the numbers alone, in id order, relies on.
    #[cfg(test)]
    pub(crate) fn numbers_every_job(&self) -> bool {
        self.last_observed.numbers_exactly(&self.jobs())
    }

    /// Forgets the `count` jobs observed least recently, with what is only about them (module
    /// docs), and returns their ids, stalest first.
    pub(crate) fn forget_stalest(&mut self, count: usize) -> Vec<String> {
        let stalest = self.last_observed.take_stalest(count);
        if stalest.is_empty() {
            return stalest;
        }
        let gone: BTreeSet<&str> = stalest.iter().map(String::as_str).collect();
        for job in &gone {
            self.profiles.remove(*job);
            self.speeds.forget(job);
        }
        self.workloads.forget(&gone);
        stalest
    }

    /// Files a profile, refitting the clustering when enough new points arrived.
    pub(crate) fn observe_profile(&mut self, job: &str, profile: Profile, seed: u64) -> Assignment {
        let point = features::of(&profile);
        self.observed([job]);
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

    /// Rebuilds what is not saved (the memory model, the ids of the jobs' observation numbers)
    /// after deserializing.
    pub(crate) fn after_load(&mut self) -> Result<()> {
        self.memory = MemoryCell::retrained(&self.memory_rows)
            .map_err(|e| EngineError::InvalidInput(format!("state: {e}")))?;
        let mut last_observed = std::mem::take(&mut self.last_observed);
        last_observed.resolve(&self.jobs());
        self.last_observed = last_observed;
        Ok(())
    }

    /// Learns a measured peak; the memory model retrains on it. On error nothing is learned.
    ///
    /// A peak of a model already reported on the same GPU (every feature equal: a recurring
    /// job's next run) is not a new row: the row keeps the higher of the two peaks, so the
    /// guard covers the worst run seen and a knowledge base fed by a live cluster grows with
    /// the distinct models and GPUs it sees, not with the runs. At most
    /// [`MAX_REPORTED_MEMORY_ROWS`] rows are kept, the first reported dropped first.
    pub(crate) fn observe_memory(&mut self, row: Row) -> Result<()> {
        let mut rows = self.memory_rows.clone();
        match rows.iter_mut().find(|r| r.features() == row.features()) {
            Some(same) => same.peak_mib = same.peak_mib.max(row.peak_mib),
            None => rows.push(row),
        }
        if rows.len() > MAX_REPORTED_MEMORY_ROWS {
            rows.drain(..rows.len() - MAX_REPORTED_MEMORY_ROWS);
        }
        self.memory =
            MemoryCell::retrained(&rows).map_err(|e| EngineError::InvalidInput(e.to_string()))?;
        self.memory_rows = rows;
        Ok(())
    }

    /// Learns that `job`'s workload does `work_per_s` units of work per second alone on a GPU
    /// of model `gpu_model` (replacing an earlier report).
    pub(crate) fn observe_speed(&mut self, job: &str, gpu_model: &str, work_per_s: f64) {
        self.observed([job]);
        self.speeds.observe(job, gpu_model, work_per_s);
    }

    /// Makes the speed of `job` on `gpu_model` infinite: what no accepted observation can do,
    /// for the test of the defence behind the bounds (`save` writes every number finite).
    #[cfg(test)]
    pub(crate) fn plant_non_finite_speed(&mut self, job: &str, gpu_model: &str) {
        self.speeds.observe(job, gpu_model, f64::INFINITY);
    }

    /// Speed of `job`'s workload alone on `gpu_model`, reported or scaled from another model
    /// (see [`Speeds::speed`]).
    pub(crate) fn speed(&self, job: &str, gpu_model: &str) -> Option<f64> {
        self.speeds.speed(job, gpu_model)
    }

    /// [`Knowledge::speed`] on each of `gpu_models`, in their order.
    pub(crate) fn speeds<'m>(
        &self,
        job: &str,
        gpu_models: impl Iterator<Item = &'m str>,
    ) -> impl Iterator<Item = Option<f64>> {
        self.speeds.speeds(job, gpu_models)
    }

    /// The profile observed under `job`, else under its workload (see [`workload_of`]).
    pub(crate) fn profile(&self, job: &str) -> Option<&Profile> {
        self.profiles
            .get(job)
            .or_else(|| self.profiles.get(workload_of(job)))
    }

    /// Whether any co-location outcome was observed: before the first, every pair's belief is
    /// a prior.
    pub(crate) fn has_outcomes(&self) -> bool {
        self.outcomes > 0
    }

    /// Folds a validated outcome into what the engine knows. Every outcome teaches the
    /// per-workload model; one whose jobs all have profiles also refines the cluster matrix
    /// and the residual model. Cannot fail once validated, so it is all or nothing.
    pub(crate) fn observe_outcome(&mut self, outcome: &Outcome) -> Result<()> {
        self.observed(outcome.jobs.iter().map(String::as_str));
        self.workloads.learn(outcome);
        self.outcomes = self.outcomes.saturating_add(1);
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
}

#[cfg(test)]
mod evidence_tests;
#[cfg(test)]
mod tests {
    use tandem_api::Job;

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
        let var_before = kb.predict_pair(&a, &b).predictive_var();
        for _ in 0..10 {
            kb.observe_outcome(&Outcome {
                gpu_model: "V100".into(),
                jobs: vec!["a".into(), "b".into()],
                solo_s: vec![100.0, 100.0],
                colocated_s: vec![140.0, 130.0],
            })
            .unwrap();
        }
        let after = kb.predict_pair(&a, &b);
        let (mean, var_after) = (after.slowdown(), after.predictive_var());
        assert!((mean - 0.4).abs() < 0.1, "{mean}");
        assert!(var_after < var_before / 4.0);
        // A similar but unseen pair benefits too.
        let (c, d) = (
            kb.view(&profile(88.0, 38.0, 4500)),
            kb.view(&profile(86.0, 36.0, 4800)),
        );
        let similar = kb.predict_pair(&c, &d).slowdown();
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
        let slowdown = kb.predict_pair(&b, &a).slowdown();
        assert!((slowdown - 0.5).abs() < 0.1, "{slowdown}");
    }
}
