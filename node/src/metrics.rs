//! The node component's Prometheus metrics, served at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::verdict::{Action, Case, MemoryLimit};

/// Labels of a GPU container's verdict.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Verdict {
    /// [`Case::name`]: `placed`, `without_annotation`, `other_node`, `unknown_gpu`,
    /// `malformed`, `unsigned`, `bad_signature`, `gpu_count`, `reservation_too_large`,
    /// `no_reservation` or `spec_unknown`.
    pub case: String,
    /// `assigned`, `left` or `refused`.
    pub action: String,
}

/// Labels of a memory reservation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Mode {
    /// `report` (not enforced), `mps` or `hami-core`.
    pub mode: String,
}

/// Labels of a container that requested no GPU.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Gpuless {
    /// `hidden` (given `NVIDIA_VISIBLE_DEVICES=void`) or `exempt` (its namespace may see every
    /// GPU: left as it is).
    pub action: String,
}

/// Every metric of the node component.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// GPU containers judged, per case and action.
    pub containers: Family<Verdict, Counter>,
    /// Containers that requested no GPU, hidden from the GPUs or exempt.
    pub gpuless: Family<Gpuless, Counter>,
    /// Reservations passed on to containers, per memory-limit mode.
    pub memory_limits: Family<Mode, Counter>,
    /// GPUs this node has.
    pub gpus: Gauge,
    /// 1 while registered with the runtime.
    pub connected: Gauge,
    /// Sessions with the runtime started (1 + reconnections).
    pub sessions: Counter,
    /// Running containers of pods Tandem placed here that do not see their GPU, as found at
    /// the last synchronization (created while this component was down).
    pub unenforced: Gauge,
    /// Pod specs that could not be read from the API server (annotated containers refused,
    /// others judged by the device plugin's evidence).
    pub pod_lookup_errors: Counter,
    /// Containers whose pod the watch had not brought yet (a GET was needed).
    pub pod_cache_misses: Counter,
    /// The placement keys trusted.
    pub placement_keys: Gauge,
    /// Changes of the placement keys' file that could not be read (the keys before stayed).
    pub placement_key_errors: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("tandem_node");
        let containers = Family::<Verdict, Counter>::default();
        registry.register(
            "containers",
            "GPU containers judged, by case (placed, without_annotation, other_node, \
             unknown_gpu, malformed, unsigned, bad_signature, gpu_count, \
             reservation_too_large, no_reservation, spec_unknown) and action (assigned, left, \
             refused)",
            containers.clone(),
        );
        let gpuless = Family::<Gpuless, Counter>::default();
        registry.register(
            "gpuless_containers",
            "Containers that requested no GPU, by action (hidden: NVIDIA_VISIBLE_DEVICES=void; \
             exempt: a namespace that may see every GPU)",
            gpuless.clone(),
        );
        let memory_limits = Family::<Mode, Counter>::default();
        registry.register(
            "memory_limits",
            "Memory reservations passed on to containers, by mode (report: not enforced)",
            memory_limits.clone(),
        );
        let gpus = Gauge::default();
        registry.register("gpus", "GPUs of this node", gpus.clone());
        let connected = Gauge::default();
        registry.register(
            "connected",
            "1 while registered with the container runtime over NRI",
            connected.clone(),
        );
        let sessions = Counter::default();
        registry.register(
            "sessions",
            "NRI sessions started with the container runtime",
            sessions.clone(),
        );
        let unenforced = Gauge::default();
        registry.register(
            "unenforced_containers",
            "Running containers of pods placed here that do not see Tandem's GPU, at the \
             last synchronization",
            unenforced.clone(),
        );
        let pod_lookup_errors = Counter::default();
        registry.register(
            "pod_lookup_errors",
            "Pod specs the API server did not return",
            pod_lookup_errors.clone(),
        );
        let pod_cache_misses = Counter::default();
        registry.register(
            "pod_cache_misses",
            "Containers whose pod the watch had not brought yet (looked up with a GET)",
            pod_cache_misses.clone(),
        );
        let placement_keys = Gauge::default();
        registry.register(
            "placement_keys",
            "Placement signing keys trusted",
            placement_keys.clone(),
        );
        let placement_key_errors = Counter::default();
        registry.register(
            "placement_key_errors",
            "Changes of the placement keys' file that could not be read (the keys before \
             stayed in force)",
            placement_key_errors.clone(),
        );
        // Every series exists from the start, so a dashboard's rate() has a zero to start from.
        for case in Case::ALL {
            for action in Action::ALL {
                let _ = containers.get_or_create(&Verdict {
                    case: case.name().to_owned(),
                    action: action.name().to_owned(),
                });
            }
        }
        for action in ["hidden", "exempt"] {
            let _ = gpuless.get_or_create(&Gpuless {
                action: action.to_owned(),
            });
        }
        for mode in [MemoryLimit::Report, MemoryLimit::Mps, MemoryLimit::HamiCore] {
            let _ = memory_limits.get_or_create(&Mode {
                mode: mode.name().to_owned(),
            });
        }
        Self {
            registry,
            containers,
            gpuless,
            memory_limits,
            gpus,
            connected,
            sessions,
            unenforced,
            pod_lookup_errors,
            pod_cache_misses,
            placement_keys,
            placement_key_errors,
        }
    }
}

impl Metrics {
    /// Counts one verdict.
    pub fn count(&self, case: Case, action: Action) {
        self.containers
            .get_or_create(&Verdict {
                case: case.name().to_owned(),
                action: action.name().to_owned(),
            })
            .inc();
    }

    /// Counts one container that requested no GPU: `exempt` when left as it is.
    pub fn count_gpuless(&self, exempt: bool) {
        let action = if exempt { "exempt" } else { "hidden" };
        self.gpuless
            .get_or_create(&Gpuless {
                action: action.to_owned(),
            })
            .inc();
    }

    /// Counts one reservation passed on.
    pub fn count_memory(&self, mode: MemoryLimit) {
        self.memory_limits
            .get_or_create(&Mode {
                mode: mode.name().to_owned(),
            })
            .inc();
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_there_from_the_start_and_counts() {
        let metrics = Metrics::default();
        metrics.count(Case::WithoutAnnotation, Action::Left);
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"tandem_node_containers_total{case="without_annotation",action="left"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"tandem_node_containers_total{case="placed",action="assigned"} 0"#)
        );
        assert!(text.contains(r#"tandem_node_memory_limits_total{mode="mps"} 0"#));
        for case in ["unsigned", "bad_signature", "gpu_count", "spec_unknown"] {
            let series =
                format!(r#"tandem_node_containers_total{{case="{case}",action="refused"}} 0"#);
            assert!(text.contains(&series), "{series}");
        }
        assert!(text.contains(r#"tandem_node_gpuless_containers_total{action="hidden"} 0"#));
        assert!(text.contains("tandem_node_placement_keys 0"));
        assert!(text.contains("tandem_node_connected 0"));
    }
}
