//! Learning from finished runs, the core's side: the ledger pairs runs into solo samples and
//! outcomes ([`crate::outcomes`]), and what they teach is observed and stored as one batch.

use tandem_api::Outcome;

use crate::metrics::Reason;
use crate::outcomes::{self, Learned, Run};
use crate::{Core, engine, learning};

impl Core {
    /// Learns from a run that finished (leader only): a solo sample, or an outcome once both
    /// runs of a shared GPU are done (see [`outcomes`]). `others` are the runs that used the
    /// same GPU around it.
    pub async fn run_finished(&self, run: Run, others: Vec<Run>, now: f64) {
        self.runs_finished(vec![(run, others)], now).await;
    }

    /// Learns from runs that finished, as one batch: one engine task and at most one write,
    /// and none when nothing new was learned (runs already counted, pairs still running), so
    /// catching up with thousands of finished runs costs one write. Leader only; returns how
    /// many runs taught something (solo samples and outcomes).
    pub async fn runs_finished(&self, runs: Vec<(Run, Vec<Run>)>, now: f64) -> usize {
        if !self.leadership.is_leader() || runs.is_empty() {
            return 0;
        }
        let result = self
            .observe_changes(move |state| {
                let mut learned = Vec::with_capacity(runs.len());
                let mut lessons = Vec::new();
                for (run, others) in &runs {
                    let mut taught = state.ledger.learn(run, others, now);
                    if let Learned::Outcome(outcome) = &taught {
                        let gpu = state.gpu_spec(&outcome.gpu_model);
                        let lesson = learning::slowdown_before(state.recommender(), outcome, &gpu);
                        match state.recommender().observe_outcome(outcome) {
                            Ok(()) => {
                                state.lessons.outcome(&outcome.gpu_model);
                                lessons.extend(lesson);
                            }
                            Err(error) => {
                                let error = engine::failed("observe-outcome")(error);
                                if !error.is_refusal() {
                                    return Err(error);
                                }
                                // The engine will never take it: counted, not retried.
                                taught = Learned::Skipped(outcomes::Skip::RefusedByEngine);
                            }
                        }
                    }
                    // A run alone on its GPU is its job's speed there.
                    if taught == Learned::Solo
                        && let Some(speed) = run.speed()
                    {
                        match state
                            .recommender()
                            .observe_speed(&run.job, &run.model, speed)
                        {
                            Ok(()) => state.lessons.speed(&run.job, &run.model, speed),
                            Err(error) => {
                                let error = engine::failed("observe-speed")(error);
                                if !error.is_refusal() {
                                    return Err(error);
                                }
                            }
                        }
                    }
                    learned.push(taught);
                }
                let changed = learned
                    .iter()
                    .any(|l| matches!(l, Learned::Solo | Learned::Outcome(_)));
                Ok(((learned, lessons), changed))
            })
            .await;
        let learned = match result {
            Ok((learned, lessons)) => {
                for lesson in &lessons {
                    self.metrics.slowdown(lesson);
                }
                learned
            }
            Err(error) => {
                // Not acknowledged, so not marked: the next catch-up tries these runs again.
                tracing::warn!(error = %tandem_telemetry::report(&error), "could not record finished runs");
                return 0;
            }
        };
        let mut taught = 0;
        for learned in learned {
            match learned {
                Learned::Outcome(Outcome { gpu_model, .. }) => {
                    taught += 1;
                    self.metrics.runs_learned.inc();
                    self.metrics.outcomes_learned.inc();
                    tracing::info!(
                        gpu_model,
                        "learned a co-location outcome from finished runs"
                    );
                }
                Learned::Solo => {
                    taught += 1;
                    self.metrics.runs_learned.inc();
                    tracing::debug!("recorded a solo run");
                }
                Learned::Skipped(outcomes::Skip::AlreadyCounted) => {}
                Learned::Skipped(reason) => self.skipped(reason),
            }
        }
        taught
    }

    /// Counts a finished run that taught nothing, by reason (labelled [`outcomes::Skip::label`],
    /// so a front-end that finds a run unusable before the core sees it counts it under the
    /// same label as the core would).
    pub fn skipped(&self, reason: outcomes::Skip) {
        self.metrics
            .outcomes_skipped
            .get_or_create(&Reason {
                reason: reason.label().to_owned(),
            })
            .inc();
    }
}
