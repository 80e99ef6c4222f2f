//! Prometheus metrics, served at `/metrics`: the same families for every adapter, so one
//! dashboard reads them all.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::learning::{PeakLesson, SlowdownLesson};

/// Labels of a verb.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Verb {
    /// `filter`, `prioritize`, `bind`, `profiles`, `outcomes`, ...
    pub verb: String,
}

/// How a request was answered: the `result` label of `tandem_decisions_total`.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum Answered {
    /// With the verb's answer (`ok`).
    Ok,
    /// Refused: the request, or what it asked, is the caller's mistake (`rejected`).
    Rejected,
    /// Not answered: the engine or an API failed (`error`).
    Error,
}

impl Answered {
    /// The label's value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Rejected => "rejected",
            Self::Error => "error",
        }
    }
}

impl EncodeLabelValue for Answered {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// Labels of a decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Decision {
    /// The verb.
    pub verb: String,
    /// How it was answered.
    pub result: Answered,
}

/// Labels of an engine call.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Call {
    /// The engine call, as the core names it (`filter`, `bind`, `observe`, ...).
    pub call: String,
}

/// Labels of a skipped outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    /// Why.
    pub reason: String,
}

/// Labels of a refused declaration.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Field {
    /// The field refused: `priority`, `work`, `model` or `batch-size`.
    pub field: String,
}

/// Labels of a GPU model.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Model {
    /// The short model name (`V100`, `T4`, ...).
    pub gpu_model: String,
}

/// Every metric the adapter exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests answered, per verb and result.
    pub decisions: Family<Decision, Counter>,
    /// Time to answer, per verb.
    pub latency: Family<Verb, Histogram>,
    /// Engine calls that failed (traps, deadlines, engine errors).
    pub engine_errors: Counter,
    /// Requests answered in a way that lets the scheduler go on without Tandem.
    pub fail_opens: Family<Verb, Counter>,
    /// Outcomes learned from finished pods.
    pub outcomes_learned: Counter,
    /// Finished runs that taught something (a solo sample or an outcome).
    pub runs_learned: Counter,
    /// Finished pods that taught nothing, per reason.
    pub outcomes_skipped: Family<Reason, Counter>,
    /// 1 while this replica leads.
    pub leader: Gauge,
    /// Knowledge-base writes that failed.
    pub store_errors: Counter,
    /// Knowledge-base writes that succeeded.
    pub store_writes: Counter,
    /// Bytes of the knowledge base as last read or written.
    pub store_bytes: Gauge,
    /// Most bytes the store holds (0: no limit known).
    pub store_limit_bytes: Gauge,
    /// Requests refused for lack of the scheduler's credential (or the intake's token).
    pub unauthorized: Family<Verb, Counter>,
    /// Requests refused because the bodies already in flight took the memory budget.
    pub bodies_refused: Counter,
    /// Time the engine thread spent on one task, per call.
    pub engine_call: Family<Call, Histogram>,
    /// Engine calls whose caller stopped waiting (its time limit passed).
    pub engine_timeouts: Counter,
    /// Engine calls refused because the queue in front of the engine was full.
    pub engine_overloaded: Counter,
    /// Queued engine calls dropped unrun because their caller had stopped waiting.
    pub engine_abandoned: Counter,
    /// GPUs in the engine's cluster view.
    pub view_gpus: Gauge,
    /// Distinct GPU states among them (what a decision over the whole view costs).
    pub view_states: Gauge,
    /// Times the cluster view was rebuilt and the engine told of it, after nodes or the pods
    /// holding GPUs changed: how often the watch stream costs a pass over the whole view.
    pub view_rebuilds: Counter,
    /// Binds finished after the scheduler's own time limit had passed: the scheduler may have
    /// given up on them (and bound the pod itself).
    pub binds_late: Counter,
    /// Pods seen bound to a node without Tandem's record of their GPU: placed by the
    /// scheduler's fallback (fail-open) or by another scheduler.
    pub binds_without_tandem: Counter,
    /// Jobs refused at a scheduler's call for a declaration that does not parse, per field.
    pub declarations_refused: Family<Field, Counter>,
    /// Time one retraining took off the decision path (building the instance, learning,
    /// warming its models up).
    pub retrain_seconds: Histogram,
    /// Peaks of declared jobs the memory model learned.
    pub peaks_learned: Counter,
    /// How far the memory model's prediction was from a measured peak, before learning it:
    /// `|measured - predicted| / measured`, per GPU model.
    pub memory_error: Family<Model, Histogram>,
    /// Measured peaks above what the guard had reserved for them, per GPU model: sharing
    /// decided on that reservation could have run out of memory.
    pub peaks_over_reservation: Family<Model, Counter>,
    /// When the knowledge base was last written or loaded, in seconds since the Unix epoch.
    pub store_changed: Gauge<f64, AtomicU64>,
    /// Slowdowns the engine predicted for the jobs of each outcome, before learning it, per
    /// GPU model (a fraction: 0.25 is 25% longer than alone).
    pub slowdown_predicted: Family<Model, Histogram>,
    /// Slowdowns observed in those outcomes, per GPU model.
    pub slowdown_observed: Family<Model, Histogram>,
    /// Intake requests refused because their caller had posted its minute's worth of items
    /// ([`crate::intake::RateBound`]), per verb.
    pub intake_rate_limited: Family<Verb, Counter>,
    /// Times the newest stored knowledge base could not be used (unreadable, or refused by the
    /// engine) and the last good one was loaded instead.
    pub knowledge_fallbacks: Counter,
    /// Jobs forgotten, the stalest first, so that the knowledge base fits its store again.
    pub knowledge_evictions: Counter,
    /// Observations refused because the knowledge base holding them did not load back into a
    /// fresh engine (so it was not stored).
    pub loadback_refusals: Counter,
    /// Time to load the knowledge base to be stored into a fresh engine, before it is stored.
    pub loadback_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("tandem");
        let decisions = Family::<Decision, Counter>::default();
        let latency = Family::<Verb, Histogram>::new_with_constructor(|| {
            // 100 µs .. ~3 s.
            Histogram::new(exponential_buckets(0.0001, 2.0, 16))
        });
        let engine_errors = Counter::default();
        let fail_opens = Family::<Verb, Counter>::default();
        let outcomes_learned = Counter::default();
        let runs_learned = Counter::default();
        let outcomes_skipped = Family::<Reason, Counter>::default();
        for skip in crate::outcomes::Skip::ALL {
            outcomes_skipped
                .get_or_create(&Reason {
                    reason: skip.label().to_owned(),
                })
                .inc_by(0);
        }
        let leader = Gauge::default();
        let store_errors = Counter::default();
        let store_writes = Counter::default();
        let store_bytes = Gauge::default();
        let store_limit_bytes = Gauge::default();
        let unauthorized = Family::<Verb, Counter>::default();
        let bodies_refused = Counter::default();
        let engine_call = Family::<Call, Histogram>::new_with_constructor(|| {
            // 10 µs .. ~5 s.
            Histogram::new(exponential_buckets(0.00001, 2.0, 20))
        });
        let engine_timeouts = Counter::default();
        let engine_overloaded = Counter::default();
        let engine_abandoned = Counter::default();
        let view_gpus = Gauge::default();
        let view_states = Gauge::default();
        let view_rebuilds = Counter::default();
        let binds_late = Counter::default();
        let binds_without_tandem = Counter::default();
        let declarations_refused = Family::<Field, Counter>::default();
        // Every field at zero from the start: a refusal is then an increase an alert sees.
        for field in crate::declaration::Field::ALL {
            declarations_refused
                .get_or_create(&Field {
                    field: field.key().to_owned(),
                })
                .inc_by(0);
        }
        let memory_error = Family::<Model, Histogram>::new_with_constructor(|| {
            // 1% .. ~160%.
            Histogram::new(exponential_buckets(0.01, 2.0, 8))
        });
        let peaks_over_reservation = Family::<Model, Counter>::default();
        let store_changed = Gauge::<f64, AtomicU64>::default();
        let slowdown = || {
            // 1% .. ~256%.
            Histogram::new(exponential_buckets(0.01, 2.0, 9))
        };
        let slowdown_predicted = Family::<Model, Histogram>::new_with_constructor(slowdown);
        let slowdown_observed = Family::<Model, Histogram>::new_with_constructor(slowdown);
        // 10 ms .. ~40 s.
        let retrain_seconds = Histogram::new(exponential_buckets(0.01, 2.0, 13));
        let peaks_learned = Counter::default();
        registry.register(
            "declarations_refused",
            "Jobs refused at a scheduler's call for a declaration that does not parse, per field",
            declarations_refused.clone(),
        );
        registry.register(
            "retrain_seconds",
            "Time one retraining took off the decision path",
            retrain_seconds.clone(),
        );
        registry.register(
            "peaks_learned",
            "Peaks of declared jobs the memory model learned",
            peaks_learned.clone(),
        );
        registry.register(
            "decisions",
            "Requests answered, per verb and result",
            decisions.clone(),
        );
        registry.register(
            "request_latency_seconds",
            "Time to answer a request, per verb",
            latency.clone(),
        );
        registry.register(
            "engine_errors",
            "Engine calls that failed",
            engine_errors.clone(),
        );
        registry.register(
            "fail_opens",
            "Requests answered so that the scheduler goes on without Tandem",
            fail_opens.clone(),
        );
        registry.register(
            "outcomes_learned",
            "Co-location outcomes learned from finished pods",
            outcomes_learned.clone(),
        );
        registry.register(
            "runs_learned",
            "Finished runs that taught something (a solo sample or a co-location outcome)",
            runs_learned.clone(),
        );
        registry.register(
            "outcomes_skipped",
            "Finished pods that taught nothing, per reason",
            outcomes_skipped.clone(),
        );
        registry.register("leader", "1 while this replica leads", leader.clone());
        registry.register(
            "store_errors",
            "Knowledge-base writes that failed",
            store_errors.clone(),
        );
        registry.register(
            "store_writes",
            "Knowledge-base writes that succeeded",
            store_writes.clone(),
        );
        registry.register(
            "store_bytes",
            "Bytes of the knowledge base as last read or written",
            store_bytes.clone(),
        );
        registry.register(
            "store_limit_bytes",
            "Most bytes the knowledge-base store holds (0: no limit)",
            store_limit_bytes.clone(),
        );
        registry.register(
            "unauthorized",
            "Requests refused for lack of the caller's credential, per verb",
            unauthorized.clone(),
        );
        registry.register(
            "bodies_refused",
            "Requests refused because the bodies in flight already took the memory budget",
            bodies_refused.clone(),
        );
        registry.register(
            "engine_call_seconds",
            "Time the engine thread spent on one call, per call",
            engine_call.clone(),
        );
        registry.register(
            "engine_timeouts",
            "Engine calls whose caller stopped waiting",
            engine_timeouts.clone(),
        );
        registry.register(
            "engine_overloaded",
            "Engine calls refused because the engine's queue was full",
            engine_overloaded.clone(),
        );
        registry.register(
            "engine_abandoned",
            "Queued engine calls dropped unrun because their caller had stopped waiting",
            engine_abandoned.clone(),
        );
        registry.register(
            "view_gpus",
            "GPUs in the engine's cluster view",
            view_gpus.clone(),
        );
        registry.register(
            "view_states",
            "Distinct GPU states in the engine's cluster view",
            view_states.clone(),
        );
        registry.register(
            "view_rebuilds",
            "Times the cluster view was rebuilt and the engine told of it",
            view_rebuilds.clone(),
        );
        registry.register(
            "binds_late",
            "Binds finished after the scheduler's own time limit had passed",
            binds_late.clone(),
        );
        registry.register(
            "binds_without_tandem",
            "Pods seen bound without Tandem's record of their GPU (fail-open or another scheduler)",
            binds_without_tandem.clone(),
        );
        registry.register(
            "memory_prediction_error_ratio",
            "How far the memory model's prediction was from a measured peak before learning it, |measured - predicted| / measured, per GPU model",
            memory_error.clone(),
        );
        registry.register(
            "peaks_over_reservation",
            "Measured peaks above what the memory guard had reserved for them, per GPU model",
            peaks_over_reservation.clone(),
        );
        registry.register(
            "store_changed_timestamp_seconds",
            "When the knowledge base was last written or loaded (Unix time)",
            store_changed.clone(),
        );
        registry.register(
            "slowdown_predicted",
            "Slowdowns the engine predicted for the jobs of each learned outcome, before learning it, per GPU model (a fraction)",
            slowdown_predicted.clone(),
        );
        let intake_rate_limited = Family::<Verb, Counter>::default();
        for verb in ["profiles", "outcomes"] {
            let labels = Verb {
                verb: verb.to_owned(),
            };
            intake_rate_limited.get_or_create(&labels).inc_by(0);
            unauthorized.get_or_create(&labels).inc_by(0);
        }
        registry.register(
            "intake_rate_limited",
            "Intake requests refused because their caller posted its minute's worth of items, per verb",
            intake_rate_limited.clone(),
        );
        let knowledge_fallbacks = Counter::default();
        registry.register(
            "knowledge_fallbacks",
            "Times the newest stored knowledge base could not be used and the last good one was loaded",
            knowledge_fallbacks.clone(),
        );
        let knowledge_evictions = Counter::default();
        registry.register(
            "knowledge_evictions",
            "Jobs forgotten, the stalest first, so that the knowledge base fits its store",
            knowledge_evictions.clone(),
        );
        let loadback_refusals = Counter::default();
        registry.register(
            "knowledge_loadback_refusals",
            "Observations refused because the knowledge base holding them did not load back into a fresh engine",
            loadback_refusals.clone(),
        );
        // 1 ms .. ~65 s.
        let loadback_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        registry.register(
            "knowledge_loadback_seconds",
            "Time to load the knowledge base to be stored into a fresh engine before storing it",
            loadback_seconds.clone(),
        );
        registry.register(
            "slowdown_observed",
            "Slowdowns observed in the learned outcomes, (co-located - solo) / solo, per GPU model",
            slowdown_observed.clone(),
        );
        Self {
            registry,
            decisions,
            latency,
            engine_errors,
            fail_opens,
            outcomes_learned,
            runs_learned,
            outcomes_skipped,
            leader,
            store_errors,
            store_writes,
            store_bytes,
            store_limit_bytes,
            unauthorized,
            bodies_refused,
            engine_call,
            engine_timeouts,
            engine_overloaded,
            engine_abandoned,
            view_gpus,
            view_states,
            view_rebuilds,
            binds_late,
            binds_without_tandem,
            declarations_refused,
            retrain_seconds,
            peaks_learned,
            memory_error,
            peaks_over_reservation,
            store_changed,
            slowdown_predicted,
            slowdown_observed,
            intake_rate_limited,
            knowledge_fallbacks,
            knowledge_evictions,
            loadback_refusals,
            loadback_seconds,
        }
    }
}

impl Metrics {
    /// Records what the memory model made of a peak measured on `model`.
    pub fn peak(&self, model: &str, lesson: &PeakLesson) {
        let labels = Model {
            gpu_model: model.to_owned(),
        };
        let measured = f64::from(lesson.measured_mib.max(1));
        let predicted = f64::from(lesson.predicted_before_mib);
        self.memory_error
            .get_or_create(&labels)
            .observe((measured - predicted).abs() / measured);
        if lesson.measured_mib > lesson.reserved_before_mib {
            self.peaks_over_reservation.get_or_create(&labels).inc();
        }
    }

    /// Records what the engine predicted of an outcome's slowdowns against what was observed.
    pub fn slowdown(&self, lesson: &SlowdownLesson) {
        let labels = Model {
            gpu_model: lesson.gpu_model.clone(),
        };
        let predicted = self.slowdown_predicted.get_or_create(&labels);
        for slowdown in &lesson.predicted {
            predicted.observe(slowdown.max(0.0));
        }
        let observed = self.slowdown_observed.get_or_create(&labels);
        for slowdown in &lesson.observed {
            observed.observe(slowdown.max(0.0));
        }
    }

    /// Exports the fail-open and unauthorized counters of `verbs` at zero.
    pub fn expect_verbs(&self, verbs: &[&str]) {
        for verb in verbs {
            let labels = Verb {
                verb: (*verb).to_owned(),
            };
            self.fail_opens.get_or_create(&labels).inc_by(0);
            self.unauthorized.get_or_create(&labels).inc_by(0);
        }
    }

    /// Records that the knowledge base of `bytes` was just written or loaded.
    pub fn stored(&self, bytes: usize) {
        self.store_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        self.store_changed.set(now);
    }

    /// Counts one answer of `verb` that took `seconds`.
    pub fn record(&self, verb: &str, result: Answered, seconds: f64) {
        self.decisions
            .get_or_create(&Decision {
                verb: verb.to_owned(),
                result,
            })
            .inc();
        self.latency
            .get_or_create(&Verb {
                verb: verb.to_owned(),
            })
            .observe(seconds);
    }

    /// Records the time the engine thread spent on one `call`.
    pub fn observe_engine_call(&self, call: &str, seconds: f64) {
        self.engine_call
            .get_or_create(&Call {
                call: call.to_owned(),
            })
            .observe(seconds);
    }

    /// Records a rebuilt cluster view the engine was just told of, and its size.
    pub fn observe_view(&self, summary: &tandem_api::ClusterSummary) {
        self.view_rebuilds.inc();
        self.view_gpus.set(i64::from(summary.gpus));
        self.view_states.set(i64::from(summary.states));
    }

    /// Counts a job refused at a scheduler's call for the declaration `refusal` names.
    pub fn refused(&self, refusal: &crate::declaration::Refusal) {
        self.declarations_refused
            .get_or_create(&Field {
                field: refusal.field.key().to_owned(),
            })
            .inc();
    }

    /// Counts a fail-open answer of `verb`.
    pub fn fail_open(&self, verb: &str) {
        self.fail_opens
            .get_or_create(&Verb {
                verb: verb.to_owned(),
            })
            .inc();
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|value| value.trim().parse().ok())
    }

    #[test]
    fn series_with_known_labels_exist_at_zero_before_any_event() {
        let metrics = Metrics::default();
        metrics.expect_verbs(&["filter"]);
        let text = metrics.encode();
        for name in [
            r#"tandem_fail_opens_total{verb="filter"}"#,
            r#"tandem_unauthorized_total{verb="filter"}"#,
            r#"tandem_declarations_refused_total{field="batch-size"}"#,
            r#"tandem_outcomes_skipped_total{reason="no solo history"}"#,
        ] {
            assert_eq!(sample(&text, name), Some(0.0), "{name} in\n{text}");
        }
    }

    #[test]
    fn a_peak_over_its_reservation_is_counted_and_its_error_observed_per_model() {
        let metrics = Metrics::default();
        let lesson = |measured, predicted, reserved| PeakLesson {
            measured_mib: measured,
            predicted_before_mib: predicted,
            reserved_before_mib: reserved,
            predicted_after_mib: measured,
            reserved_after_mib: measured,
        };
        metrics.peak("T4", &lesson(10_000, 8_000, 9_000));
        metrics.peak("T4", &lesson(10_000, 10_000, 12_000));
        let text = metrics.encode();
        let over = r#"tandem_peaks_over_reservation_total{gpu_model="T4"}"#;
        assert_eq!(sample(&text, over), Some(1.0));
        let count = r#"tandem_memory_prediction_error_ratio_count{gpu_model="T4"}"#;
        assert_eq!(sample(&text, count), Some(2.0));
        // |10000 - 8000| / 10000 + 0.
        let sum = r#"tandem_memory_prediction_error_ratio_sum{gpu_model="T4"}"#;
        assert!((sample(&text, sum).unwrap() - 0.2).abs() < 1e-9, "{text}");
    }

    #[test]
    fn predicted_and_observed_slowdowns_are_observed_per_model() {
        let metrics = Metrics::default();
        metrics.slowdown(&SlowdownLesson {
            gpu_model: "V100".into(),
            predicted: vec![0.1, 0.2],
            observed: vec![0.3, -0.01],
        });
        let text = metrics.encode();
        let predicted = r#"tandem_slowdown_predicted_sum{gpu_model="V100"}"#;
        assert!((sample(&text, predicted).unwrap() - 0.3).abs() < 1e-9);
        // A job that ran faster beside its partner counts as no slowdown.
        let observed = r#"tandem_slowdown_observed_sum{gpu_model="V100"}"#;
        assert!((sample(&text, observed).unwrap() - 0.3).abs() < 1e-9);
        let stored = "tandem_store_changed_timestamp_seconds";
        assert_eq!(sample(&text, stored), Some(0.0));
        metrics.stored(1_000);
        assert!(sample(&metrics.encode(), stored).unwrap() > 1.7e9);
    }

    #[test]
    fn every_view_the_engine_is_told_of_is_counted_with_its_size() {
        let metrics = Metrics::default();
        for gpus in [4, 6] {
            metrics.observe_view(&tandem_api::ClusterSummary {
                gpus,
                nodes: 2,
                states: 2,
                handles: gpus,
            });
        }
        let text = metrics.encode();
        assert_eq!(sample(&text, "tandem_view_rebuilds_total"), Some(2.0));
        assert_eq!(sample(&text, "tandem_view_gpus"), Some(6.0));
        assert_eq!(sample(&text, "tandem_view_states"), Some(2.0));
    }
}
