//! Prometheus metrics, served at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a verb.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Verb {
    /// `filter`, `prioritize`, `bind`, `profiles`, `outcomes`, ...
    pub verb: String,
}

/// Labels of a decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Decision {
    /// The verb.
    pub verb: String,
    /// `ok`, `rejected` (bad request), `error` (engine or API failure) or `fail_open`.
    pub result: String,
}

/// Labels of a skipped outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    /// Why.
    pub reason: String,
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
    /// Finished pods that taught nothing, per reason.
    pub outcomes_skipped: Family<Reason, Counter>,
    /// 1 while this replica leads.
    pub leader: Gauge,
    /// Knowledge-base writes that failed.
    pub store_errors: Counter,
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
        let outcomes_skipped = Family::<Reason, Counter>::default();
        let leader = Gauge::default();
        let store_errors = Counter::default();
        registry.register(
            "extender_decisions",
            "Requests answered, per verb and result",
            decisions.clone(),
        );
        registry.register(
            "extender_latency_seconds",
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
        Self {
            registry,
            decisions,
            latency,
            engine_errors,
            fail_opens,
            outcomes_learned,
            outcomes_skipped,
            leader,
            store_errors,
        }
    }
}

impl Metrics {
    /// Counts one answer of `verb` that took `seconds`.
    pub fn record(&self, verb: &str, result: &str, seconds: f64) {
        self.decisions
            .get_or_create(&Decision {
                verb: verb.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        self.latency
            .get_or_create(&Verb {
                verb: verb.to_owned(),
            })
            .observe(seconds);
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
