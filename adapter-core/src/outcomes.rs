//! Turning finished pods into outcomes the engine learns from.
//!
//! A live cluster never measures what the engine's outcomes need directly: how long a job
//! would have taken alone. The adapter estimates it from history:
//!
//! - A pod that ran **alone** on its GPU (nothing else overlapped its run) adds its run time
//!   to the job's solo history on that GPU model (the last [`SOLO_HISTORY`] runs).
//! - When the second of **two pods that shared a GPU** finishes, and each spent at least
//!   [`MIN_OVERLAP`] of its run beside the other, and both jobs have a solo history on that
//!   model, the adapter reports an outcome: solo time = the median of the job's solo runs,
//!   co-located time = its measured run.
//!
//! Everything else is skipped and counted by reason (`tandem_outcomes_skipped_total`). The
//! estimate is only as good as the assumption that a job's runs are alike: the spread of its
//! solo runs is the error of the estimated slowdown (a job whose solo runs vary by 10% gives
//! slowdowns good to about ±10 points), and the part of a run spent alone (up to 20%) dilutes
//! the measured slowdown by up to that share. Groups of three or more are not estimated yet.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use tandem_api::Outcome;

/// Solo runs remembered per job and GPU model.
pub const SOLO_HISTORY: usize = 5;

/// Share of each job's run that must overlap its partner's for the pair to count.
pub const MIN_OVERLAP: f64 = 0.8;

/// Runs remembered as already turned into knowledge (so a restart does not count them twice).
/// Older ones are forgotten but still not counted again: see [`Ledger`]'s horizon.
pub const PROCESSED_HISTORY: usize = 4_096;

/// Jobs (per GPU model) whose solo history is kept; the least recently updated goes first.
pub const SOLO_JOBS: usize = 2_048;

/// One pod's run on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The run's identity, keyed ([`crate::JobKeys::key_run`]): stored in the ledger, so never
    /// a raw pod UID.
    pub uid: String,
    /// Keyed job id.
    pub job: String,
    /// GPU model.
    pub model: String,
    /// Start, in seconds since the epoch.
    pub start: f64,
    /// End, in seconds since the epoch; `None` while it runs.
    pub end: Option<f64>,
    /// The work the run did, in the unit its job's speeds are taught in
    /// ([`crate::declaration::Declaration::work_done`]: the units it declared, else one run).
    pub work: f64,
}

impl Run {
    fn overlap(&self, other: &Run, now: f64) -> f64 {
        let end = self.end.unwrap_or(now);
        let other_end = other.end.unwrap_or(now);
        (end.min(other_end) - self.start.max(other.start)).max(0.0)
    }

    fn duration(&self, now: f64) -> f64 {
        self.end.unwrap_or(now) - self.start
    }

    /// Its speed alone, work per second, once it finished (`None` before, or without a run
    /// time).
    pub fn speed(&self) -> Option<f64> {
        let seconds = self.end? - self.start;
        let speed = self.work / seconds;
        (seconds > 0.0 && speed.is_finite() && speed > 0.0).then_some(speed)
    }
}

/// What one finished run taught.
#[derive(Debug, Clone, PartialEq)]
pub enum Learned {
    /// The run was alone: a solo sample.
    Solo,
    /// The run completed a pair: an outcome for the engine.
    Outcome(Outcome),
    /// Nothing, for this reason.
    Skipped(Skip),
}

/// Why a finished run taught nothing (`tandem_outcomes_skipped_total`, by [`Skip::label`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The run has not finished.
    StillRunning,
    /// The run was learned from before.
    AlreadyCounted,
    /// The pod carries no start or end time.
    NoRunTime,
    /// The job it shared a GPU with has not finished: the pair is learned when it does.
    PartnerStillRunning,
    /// The job it shared a GPU with was counted before.
    PartnerAlreadyCounted,
    /// The two ran together too briefly to tell a slowdown.
    OverlapTooShort,
    /// A job of the pair never ran alone: there is nothing to compare with.
    NoSoloHistory,
    /// Both runs were of one job.
    TwoRunsOfOneJob,
    /// More than two jobs shared the GPU: outcomes are pairs.
    MoreThanTwo,
    /// The engine refused what the run taught (a GPU model it does not know, say).
    RefusedByEngine,
}

impl Skip {
    /// Every reason: each is exported from the start, at zero.
    pub const ALL: [Skip; 10] = [
        Skip::StillRunning,
        Skip::AlreadyCounted,
        Skip::NoRunTime,
        Skip::PartnerStillRunning,
        Skip::PartnerAlreadyCounted,
        Skip::OverlapTooShort,
        Skip::NoSoloHistory,
        Skip::TwoRunsOfOneJob,
        Skip::MoreThanTwo,
        Skip::RefusedByEngine,
    ];

    /// The reason as the metric labels it.
    pub fn label(self) -> &'static str {
        match self {
            Skip::StillRunning => "still running",
            Skip::AlreadyCounted => "already counted",
            Skip::NoRunTime => "no run time",
            Skip::PartnerStillRunning => "partner still running",
            Skip::PartnerAlreadyCounted => "partner already counted",
            Skip::OverlapTooShort => "overlap too short",
            Skip::NoSoloHistory => "no solo history",
            Skip::TwoRunsOfOneJob => "two runs of one job",
            Skip::MoreThanTwo => "more than two jobs shared the GPU",
            Skip::RefusedByEngine => "refused by the engine",
        }
    }
}

/// What the adapter remembers to estimate outcomes: solo history and processed runs. It is
/// stored with the knowledge base, so it is bounded: at most [`SOLO_JOBS`] solo histories (the
/// least recently updated forgotten first) and [`PROCESSED_HISTORY`] processed runs. A run
/// that falls out of the processed list moves the *horizon* to its end: runs that ended by
/// then are never counted again, so a bounded list still counts every run at most once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Solo run times, keyed `<job>@<model>`.
    solo: BTreeMap<String, VecDeque<f64>>,
    /// Keys of `solo`, least recently updated first.
    #[serde(default)]
    solo_order: VecDeque<String>,
    /// Keyed ids of runs already accounted for, with their end, oldest first.
    #[serde(default)]
    done: VecDeque<(String, f64)>,
    /// Runs that ended at or before this were accounted for or forgotten: never counted again.
    #[serde(default)]
    horizon: Option<f64>,
    /// Raw pod UIDs of ledgers written before run ids were keyed: read, never written. Their
    /// presence sets the horizon at the next run learned, so nothing is counted twice.
    #[serde(default, skip_serializing)]
    processed: VecDeque<String>,
}

impl Ledger {
    /// Whether the run was already accounted for (or ended before what the ledger remembers).
    pub fn is_processed(&self, uid: &str) -> bool {
        self.done.iter().any(|(u, _)| u == uid)
    }

    /// How many runs and solo histories it holds.
    pub fn len(&self) -> (usize, usize) {
        (self.done.len(), self.solo.len())
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty() && self.solo.is_empty()
    }

    fn mark(&mut self, uid: &str, end: f64) {
        if self.is_processed(uid) {
            return;
        }
        self.done.push_back((uid.to_owned(), end));
        while self.done.len() > PROCESSED_HISTORY {
            if let Some((_, end)) = self.done.pop_front() {
                self.horizon = Some(self.horizon.map_or(end, |h| h.max(end)));
            }
        }
    }

    fn add_solo(&mut self, key: String, seconds: f64) {
        let runs = self.solo.entry(key.clone()).or_default();
        runs.push_back(seconds);
        if runs.len() > SOLO_HISTORY {
            runs.pop_front();
        }
        self.solo_order.retain(|k| *k != key);
        self.solo_order.push_back(key);
        while self.solo_order.len() > SOLO_JOBS {
            if let Some(oldest) = self.solo_order.pop_front() {
                self.solo.remove(&oldest);
            }
        }
    }

    /// Median solo time of `job` on `model`, if it ever ran alone there.
    pub fn solo(&self, job: &str, model: &str) -> Option<f64> {
        let runs = self.solo.get(&format!("{job}@{model}"))?;
        let mut sorted: Vec<f64> = runs.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        Some(if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        })
    }

    /// Accounts for `finished`, given every other run that used the same GPU around it.
    /// `now` stands in for the end of runs still going.
    pub fn learn(&mut self, finished: &Run, same_gpu: &[Run], now: f64) -> Learned {
        let Some(end) = finished.end else {
            return Learned::Skipped(Skip::StillRunning);
        };
        if !self.processed.is_empty() {
            // A ledger of raw UIDs: what it counted cannot be matched any more.
            self.processed.clear();
            self.horizon = Some(self.horizon.map_or(now, |h| h.max(now)));
        }
        if self.is_processed(&finished.uid) || self.horizon.is_some_and(|h| end <= h) {
            return Learned::Skipped(Skip::AlreadyCounted);
        }
        if end <= finished.start {
            self.mark(&finished.uid, end);
            return Learned::Skipped(Skip::NoRunTime);
        }
        let partners: Vec<&Run> = same_gpu
            .iter()
            .filter(|o| o.uid != finished.uid && finished.overlap(o, now) > 0.0)
            .collect();
        match partners.as_slice() {
            [] => {
                self.add_solo(
                    format!("{}@{}", finished.job, finished.model),
                    end - finished.start,
                );
                self.mark(&finished.uid, end);
                Learned::Solo
            }
            [partner] => {
                let Some(partner_end) = partner.end else {
                    // The partner's finish will complete the pair.
                    return Learned::Skipped(Skip::PartnerStillRunning);
                };
                if self.is_processed(&partner.uid) {
                    // Counted with another run (or alone) already: this one completes nothing.
                    self.mark(&finished.uid, end);
                    return Learned::Skipped(Skip::PartnerAlreadyCounted);
                }
                self.mark(&finished.uid, end);
                self.mark(&partner.uid, partner_end);
                let shared = finished.overlap(partner, now);
                if shared < MIN_OVERLAP * finished.duration(now)
                    || shared < MIN_OVERLAP * partner.duration(now)
                {
                    return Learned::Skipped(Skip::OverlapTooShort);
                }
                let (Some(solo_a), Some(solo_b)) = (
                    self.solo(&finished.job, &finished.model),
                    self.solo(&partner.job, &partner.model),
                ) else {
                    return Learned::Skipped(Skip::NoSoloHistory);
                };
                if finished.job == partner.job {
                    return Learned::Skipped(Skip::TwoRunsOfOneJob);
                }
                Learned::Outcome(Outcome {
                    gpu_model: finished.model.clone(),
                    jobs: vec![finished.job.clone(), partner.job.clone()],
                    solo_s: vec![solo_a, solo_b],
                    colocated_s: vec![finished.duration(now), partner.duration(now)],
                })
            }
            _ => {
                self.mark(&finished.uid, end);
                Learned::Skipped(Skip::MoreThanTwo)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(uid: &str, job: &str, start: f64, end: Option<f64>) -> Run {
        Run {
            uid: uid.to_owned(),
            job: job.to_owned(),
            model: "V100".to_owned(),
            start,
            end,
            work: 1.0,
        }
    }

    #[test]
    fn solo_runs_build_a_median_history() {
        let mut ledger = Ledger::default();
        for (i, seconds) in [100.0, 120.0, 90.0].into_iter().enumerate() {
            let r = run(&format!("u{i}"), "a", 0.0, Some(seconds));
            assert_eq!(ledger.learn(&r, &[], 1e9), Learned::Solo);
        }
        assert_eq!(ledger.solo("a", "V100"), Some(100.0));
        assert_eq!(ledger.solo("a", "K80"), None);
    }

    #[test]
    fn a_finished_pair_with_solo_history_is_an_outcome_reported_once() {
        let mut ledger = Ledger::default();
        ledger.learn(&run("s1", "a", 0.0, Some(100.0)), &[], 1e9);
        ledger.learn(&run("s2", "b", 0.0, Some(50.0)), &[], 1e9);
        let a = run("p1", "a", 1000.0, Some(1150.0));
        let b_running = run("p2", "b", 1000.0, None);
        assert_eq!(
            ledger.learn(&a, std::slice::from_ref(&b_running), 1140.0),
            Learned::Skipped(Skip::PartnerStillRunning)
        );
        let b = run("p2", "b", 1000.0, Some(1140.0));
        let Learned::Outcome(outcome) = ledger.learn(&b, std::slice::from_ref(&a), 1200.0) else {
            panic!("expected an outcome");
        };
        assert_eq!(outcome.jobs, ["b", "a"]);
        assert_eq!(outcome.solo_s, [50.0, 100.0]);
        assert_eq!(outcome.colocated_s, [140.0, 150.0]);
        assert_eq!(
            ledger.learn(&a, &[b], 1200.0),
            Learned::Skipped(Skip::AlreadyCounted)
        );
    }

    #[test]
    fn short_overlaps_and_unknown_solo_times_are_skipped() {
        let mut ledger = Ledger::default();
        let a = run("p1", "a", 0.0, Some(100.0));
        let b = run("p2", "b", 90.0, Some(200.0));
        assert_eq!(
            ledger.learn(&b, &[a], 300.0),
            Learned::Skipped(Skip::OverlapTooShort)
        );
        let c = run("p3", "c", 0.0, Some(100.0));
        let d = run("p4", "d", 0.0, Some(100.0));
        assert_eq!(
            ledger.learn(&d, &[c], 300.0),
            Learned::Skipped(Skip::NoSoloHistory)
        );
    }

    #[test]
    fn the_ledger_is_bounded_and_counts_a_forgotten_run_never_again() {
        let mut ledger = Ledger::default();
        for i in 0..PROCESSED_HISTORY + 10 {
            let end = 100.0 + i as f64;
            let r = run(&format!("u{i}"), &format!("job{i}"), 0.0, Some(end));
            assert_eq!(ledger.learn(&r, &[], 1e9), Learned::Solo);
        }
        let (done, solo) = ledger.len();
        assert_eq!(done, PROCESSED_HISTORY);
        assert_eq!(solo, SOLO_JOBS);
        // The oldest runs fell out of the list, and still count as seen.
        let first = run("u0", "job0", 0.0, Some(100.0));
        assert!(!ledger.is_processed("u0"));
        assert_eq!(
            ledger.learn(&first, &[], 1e9),
            Learned::Skipped(Skip::AlreadyCounted)
        );
        // The least recently updated solo histories went first.
        assert_eq!(ledger.solo("job0", "V100"), None);
        let last = PROCESSED_HISTORY + 9;
        assert!(ledger.solo(&format!("job{last}"), "V100").is_some());
        let size = serde_json::to_string(&ledger).unwrap().len();
        println!("a full ledger is {size} bytes of JSON");
        assert!(size < 512 << 10, "{size}");
    }

    #[test]
    fn a_ledger_of_raw_uids_counts_nothing_that_finished_before_the_upgrade() {
        let old: Ledger =
            serde_json::from_str(r#"{"solo": {}, "processed": ["raw-uid"]}"#).unwrap();
        let mut ledger = old;
        let before = run("k1", "a", 0.0, Some(50.0));
        assert_eq!(
            ledger.learn(&before, &[], 100.0),
            Learned::Skipped(Skip::AlreadyCounted)
        );
        let after = run("k2", "a", 0.0, Some(150.0));
        assert_eq!(ledger.learn(&after, &[], 200.0), Learned::Solo);
        assert!(!serde_json::to_string(&ledger).unwrap().contains("raw-uid"));
    }

    #[test]
    fn the_ledger_survives_serialization() {
        let mut ledger = Ledger::default();
        ledger.learn(&run("s1", "a", 0.0, Some(100.0)), &[], 1e9);
        let text = serde_json::to_string(&ledger).unwrap();
        let back: Ledger = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ledger);
        assert!(back.is_processed("s1"));
    }
}
