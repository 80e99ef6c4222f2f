//! What the engine has learned: profiles by job id and measured slowdowns by group.
//!
//! The skeleton files profiles into three fixed utilization bands (light, medium, heavy) as
//! its "clusters"; the k-means knowledge base of the next engine replaces them. Outcomes are
//! learned per exact group of jobs: a later prediction for the same group uses the running
//! mean of what was measured, with an uncertainty of `1 / (1 + observations)`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tandem_api::{Assignment, EngineError, Outcome, Profile};

use crate::Result;
use crate::interference;

/// Width of one utilization band of the skeleton's fixed clusters, in percent.
const BAND_WIDTH_PCT: f32 = 100.0 / 3.0;

/// Running statistics of one group of jobs that was observed sharing a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GroupStats {
    /// Job ids, sorted.
    pub(crate) jobs: Vec<String>,
    /// Mean observed individual slowdown (fraction) of each job, in the order of `jobs`.
    pub(crate) mean_slowdown: Vec<f64>,
    /// Number of outcomes folded into the means.
    pub(crate) observations: u64,
}

/// Profiles and learned interference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Knowledge {
    pub(crate) profiles: BTreeMap<String, Profile>,
    pub(crate) groups: BTreeMap<String, GroupStats>,
}

/// The key of a group: its sorted ids, each length-prefixed so that no choice of ids can make
/// two different groups collide.
fn group_key<S: AsRef<str>>(sorted_ids: &[S]) -> String {
    sorted_ids
        .iter()
        .map(|id| format!("{}:{}", id.as_ref().len(), id.as_ref()))
        .collect::<Vec<_>>()
        .join(",")
}

impl Knowledge {
    pub(crate) fn observe_profile(&mut self, job: &str, profile: Profile) -> Assignment {
        let assignment = assign(&profile);
        self.profiles.insert(job.to_owned(), profile);
        assignment
    }

    pub(crate) fn profile(&self, job: &str) -> Option<&Profile> {
        self.profiles.get(job)
    }

    /// Folds a validated outcome into the group's means; all-or-nothing.
    pub(crate) fn observe_outcome(&mut self, outcome: &Outcome) -> Result<()> {
        if let Some(unknown) = outcome
            .jobs
            .iter()
            .find(|j| !self.profiles.contains_key(*j))
        {
            return Err(EngineError::UnknownJob(format!(
                "outcome names job `{unknown}`, whose profile was never observed"
            )));
        }
        let mut order: Vec<usize> = (0..outcome.jobs.len()).collect();
        order.sort_by(|&a, &b| outcome.jobs[a].cmp(&outcome.jobs[b]));
        let jobs: Vec<String> = order.iter().map(|&i| outcome.jobs[i].clone()).collect();
        let slowdowns: Vec<f64> = order
            .iter()
            .map(|&i| (outcome.colocated_s[i] - outcome.solo_s[i]) / outcome.solo_s[i])
            .collect();
        let stats = self
            .groups
            .entry(group_key(&jobs))
            .or_insert_with(|| GroupStats {
                mean_slowdown: vec![0.0; jobs.len()],
                jobs,
                observations: 0,
            });
        stats.observations += 1;
        let n = stats.observations as f64;
        for (mean, observed) in stats.mean_slowdown.iter_mut().zip(slowdowns) {
            *mean += (observed - *mean) / n;
        }
        Ok(())
    }

    /// Predicted slowdowns (fractions, in the order of `ids`) and their uncertainty (0..=1).
    pub(crate) fn predict(&self, ids: &[&str], profiles: &[&Profile]) -> (Vec<f64>, f64) {
        if ids.len() >= 2 {
            let mut sorted: Vec<&str> = ids.to_vec();
            sorted.sort_unstable();
            if let Some(stats) = self.groups.get(&group_key(&sorted)) {
                let slowdowns = ids
                    .iter()
                    .map(|id| {
                        let at = stats.jobs.iter().position(|j| j == id);
                        at.map_or(0.0, |i| stats.mean_slowdown[i])
                    })
                    .collect();
                return (slowdowns, 1.0 / (1.0 + stats.observations as f64));
            }
        }
        let uncertainty = if ids.len() < 2 { 0.0 } else { 1.0 };
        (interference::prior_slowdowns(profiles), uncertainty)
    }
}

/// Files a profile into its utilization band; uncertainty is the distance from the band's
/// centre, as a share of half a band (0 at the centre, 1 at its edge).
fn assign(profile: &Profile) -> Assignment {
    let band = (profile.gpu_util_pct / BAND_WIDTH_PCT).floor().min(2.0);
    let centre = (band + 0.5) * BAND_WIDTH_PCT;
    Assignment {
        cluster: band as u32,
        uncertainty: ((profile.gpu_util_pct - centre).abs() / (BAND_WIDTH_PCT / 2.0)).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(util: f32) -> Profile {
        Profile {
            gpu_util_pct: util,
            mem_access_pct: 10.0,
            mem_used_mib: 1000,
            gpu_model: "V100".into(),
        }
    }

    #[test]
    fn bands_and_uncertainty() {
        let centre = assign(&profile(50.0));
        assert_eq!(centre.cluster, 1);
        assert!(centre.uncertainty < 1e-6);
        assert_eq!(assign(&profile(100.0)).cluster, 2);
        assert!(assign(&profile(40.0)).uncertainty < assign(&profile(35.0)).uncertainty);
    }

    #[test]
    fn outcomes_replace_the_prior_for_the_same_group() {
        let mut kb = Knowledge::default();
        kb.observe_profile("a", profile(90.0));
        kb.observe_profile("b", profile(90.0));
        let outcome = Outcome {
            gpu_model: "V100".into(),
            jobs: vec!["b".into(), "a".into()],
            solo_s: vec![100.0, 100.0],
            colocated_s: vec![110.0, 130.0],
        };
        kb.observe_outcome(&outcome).unwrap();
        let (a, b) = (profile(90.0), profile(90.0));
        let (slowdowns, uncertainty) = kb.predict(&["a", "b"], &[&a, &b]);
        assert!((slowdowns[0] - 0.3).abs() < 1e-9 && (slowdowns[1] - 0.1).abs() < 1e-9);
        assert!((uncertainty - 0.5).abs() < 1e-9);
    }

    #[test]
    fn an_outcome_naming_an_unknown_job_learns_nothing() {
        let mut kb = Knowledge::default();
        kb.observe_profile("a", profile(50.0));
        let before = kb.clone();
        let outcome = Outcome {
            gpu_model: "V100".into(),
            jobs: vec!["a".into(), "ghost".into()],
            solo_s: vec![1.0, 1.0],
            colocated_s: vec![2.0, 2.0],
        };
        assert!(
            matches!(kb.observe_outcome(&outcome), Err(EngineError::UnknownJob(m)) if m.contains("ghost"))
        );
        assert_eq!(kb, before);
    }
}
