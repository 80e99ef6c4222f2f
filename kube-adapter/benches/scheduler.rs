//! Throughput of a real kube-scheduler with and without the Tandem extender, in one run.
//!
//! The shape of the burst a new user meets: kube-apiserver and etcd (the e2e suite's build),
//! 500 Node objects of 4 V100s each (GPU feature discovery's labels, no kubelet), 1,500
//! one-GPU pods created first, then kube-scheduler started; the clock runs from the moment the
//! scheduler is ready until every pod is bound. Each configuration gets a fresh control plane:
//!
//! 1. the default kube-scheduler, no extender;
//! 2. kube-scheduler with the Tandem extender (`tandem-kube-adapter` on loopback with its
//!    default options, the extender configuration of `deploy/helm/tandem/templates/extender-scheduler.yaml`:
//!    filter, prioritize, bind, `nodeCacheCapable`, `ignorable`, `httpTimeout: 2s`, client QPS
//!    500 / burst 1,000, and the chart's mutual TLS: a CA of the run signs the adapter's serving
//!    certificate and the scheduler's client certificate), whose `filter` passes only the node
//!    Tandem ranks first;
//! 3. the same over plain HTTP (`extender-http`; the chart's `extender.openVerbs`);
//! 4. the same with `--filter-passes fitting`: every node where the pod fits passes, and the
//!    scheduler calls `prioritize` and runs its own scoring plugins;
//! 5. the same with the adapter stopped: fail-open must bind every pod through the
//!    scheduler's fallback; the adapter is then started and must account for each of them
//!    (`tandem_binds_without_tandem_total`);
//! 6. `tandem-kube-scheduler`: Tandem as a framework plugin, the engine in-process
//!    (`deploy/helm/tandem/templates/plugin.yaml`'s profile), pods with its `schedulerName`;
//! 7. the extender (as in 2) and the plugin (as in 6) writing their placements unsigned, as
//!    binds were written before signatures: what signing costs the bind path, in the same run;
//! 8. where `TANDEM_BENCH_BEFORE_ADAPTER` and `TANDEM_BENCH_BEFORE_PLUGIN` name an older
//!    release's `tandem-kube-adapter` and `tandem-kube-scheduler`, those, as in 2 and 6 without
//!    placement options: this release against the older one, in the same run.
//!
//! It prints pods/s of each, the p99 of the scheduler's own scheduling-attempt latency
//! (`scheduler_scheduling_attempt_duration_seconds`, read from its `/metrics` at the end, to
//! its bucket's upper bound), the extender's and the plugin's throughput as a fraction of the
//! default's, how many pods ended up without Tandem's `tandem.dev/gpu` annotation (bound by
//! the scheduler's fallback), and how many annotations name a GPU of another node than the
//! pod's; how long the scheduler took from its start to ready (`/readyz`: informers synced,
//! and for the plugin the engine component loaded), and the peak resident memory (`VmHWM`) of
//! the scheduler process and of the extender. Each run also prints the CPU time per pod bound
//! of kube-apiserver, etcd, the scheduler and the extender while the pods were scheduled: on
//! two busy cores a configuration's pods/s follows what it adds there; the scheduler's attempts
//! by result (a pod tried again costs every process again); the API server's requests per pod
//! bound, by verb and resource (what a configuration asks of it, and so of etcd); and for the
//! extender its calls per verb and its fail-opens, engine errors, time-outs and refusals of an
//! overloaded engine, so a slow run that retried is told from one the machine slowed. Every
//! configuration runs `TANDEM_BENCH_ROUNDS` times (3), interleaved, and the ratios are of the median pods/s (the default scheduler's
//! own rate moves by a fifth between runs on two shared cores). Sizes: `TANDEM_BENCH_NODES`,
//! `TANDEM_BENCH_GPUS` (per node), `TANDEM_BENCH_PODS`; scheduler_perf's scale is
//! `TANDEM_BENCH_NODES=5000 TANDEM_BENCH_GPUS=8 TANDEM_BENCH_PODS=10000`. Configurations
//! named after `--` (`default`, `extender`, `extender-http`, `extender-fitting`, `adapter-down`,
//! `plugin`, `extender-unsigned`, `plugin-unsigned`, `extender-before`, `plugin-before`) run
//! alone.
//! `TANDEM_BENCH_PPROF=<dir>` saves CPU profiles of the scheduler and of kube-apiserver in each
//! run (see `cpu_profile`).
//!
//! Run: `cargo bench -p tandem-kube-adapter --bench scheduler` (or `cargo xtask bench`); the
//! Kubernetes binaries come from `TANDEM_KUBE_BIN_DIR`, `tandem-kube-scheduler` from
//! `TANDEM_PLUGIN_SCHEDULER`, or they are built on first use.

use tandem_e2e::cluster;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use cluster::{
    ChildProcess, Cluster, Component, Extender, create_gpu_node, ensure_namespace, free_port,
    scheduler_config, scheduler_config_with, spawn_logged,
};
use tandem_e2e::tls::{Authority, MutualTls};

const NAMESPACE: &str = "bench";
const SYSTEM: &str = "tandem-system";
const SECRET_HEX: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
/// Longest a run may take before the benchmark gives up on it, at least: a run of many pods
/// gets a twentieth of a second per pod.
const RUN_LIMIT: Duration = Duration::from_secs(300);

fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Which scheduler a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    /// kube-scheduler alone.
    Default,
    /// kube-scheduler with the Tandem extender, over mutual TLS as the chart deploys it.
    Tandem,
    /// The same over plain HTTP (the chart's `extender.openVerbs`).
    TandemHttp,
    /// The same, `filter` passing every node where the pod fits.
    TandemFitting,
    /// kube-scheduler configured with the extender, which is not running.
    AdapterDown,
    /// `tandem-kube-scheduler`: the framework plugin, in-process.
    Plugin,
    /// [`Mode::Tandem`] writing placements unsigned (`--unsigned-placements`), as binds were
    /// written before signatures: what signing costs the bind path, in the same run.
    TandemUnsigned,
    /// [`Mode::Plugin`] with `unsignedPlacements: true`.
    PluginUnsigned,
    /// [`Mode::Tandem`] with an older `tandem-kube-adapter` ([`BEFORE_ADAPTER`]), given no
    /// placement options: a release before this one, in the same run.
    TandemBefore,
    /// [`Mode::Plugin`] with an older `tandem-kube-scheduler` ([`BEFORE_PLUGIN`]).
    PluginBefore,
}

/// The variable naming an older `tandem-kube-adapter` for `extender-before`.
const BEFORE_ADAPTER: &str = "TANDEM_BENCH_BEFORE_ADAPTER";
/// The variable naming an older `tandem-kube-scheduler` for `plugin-before`.
const BEFORE_PLUGIN: &str = "TANDEM_BENCH_BEFORE_PLUGIN";

/// The program `variable` names, if it is set.
fn before(variable: &str) -> Option<std::path::PathBuf> {
    std::env::var_os(variable)
        .filter(|path| !path.is_empty())
        .map(std::path::PathBuf::from)
}

/// What one run measured.
struct Run {
    seconds: f64,
    pods: usize,
    unannotated: usize,
    misplaced: usize,
    /// Pods the adapter, started after the run, counted as bound without its record.
    accounted: u64,
    /// p99 of the scheduler's scheduling-attempt latency, in seconds (a bucket bound).
    attempt_p99: Option<f64>,
    /// Scheduling attempts by result, as the scheduler counted them.
    attempts: String,
    /// Seconds from the scheduler's start to its `/readyz` answering.
    ready: f64,
    /// Peak resident memory of the scheduler process, MiB.
    scheduler_mib: Option<f64>,
    /// Peak resident memory of the extender process, MiB, where one ran through the run.
    extender_mib: Option<f64>,
    /// CPU seconds each process spent while the pods were scheduled, in [`PROCESSES`] order
    /// (`None` where the process did not run).
    cpu: [Option<f64>; PROCESSES.len()],
    /// The extender's own account of its verbs, where one ran through the run.
    extender_latency: Option<String>,
    /// The API server's requests per pod bound while the pods were scheduled, the most
    /// frequent first ([`api_requests`]).
    api_requests: String,
}

/// The processes whose CPU time a run reports, in the order of [`Run::cpu`].
const PROCESSES: [&str; 4] = ["apiserver", "etcd", "scheduler", "extender"];

impl Run {
    fn pods_per_s(&self) -> f64 {
        self.pods as f64 / self.seconds
    }

    /// Milliseconds of CPU per pod bound, of each process that ran, and their sum: on a
    /// machine whose cores are all busy, what a configuration adds where.
    fn cpu_per_pod(&self) -> String {
        let per_pod = |seconds: f64| 1_000.0 * seconds / self.pods.max(1) as f64;
        let mut parts: Vec<String> = PROCESSES
            .iter()
            .zip(self.cpu)
            .filter_map(|(name, cpu)| Some(format!("{name} {:.2} ms", per_pod(cpu?))))
            .collect();
        parts.push(format!(
            "total {:.2} ms",
            per_pod(self.cpu.iter().flatten().sum())
        ));
        parts.join(", ")
    }
}

impl Mode {
    /// The name that selects the run (`-- default plugin`).
    fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Tandem => "extender",
            Mode::TandemHttp => "extender-http",
            Mode::TandemFitting => "extender-fitting",
            Mode::AdapterDown => "adapter-down",
            Mode::Plugin => "plugin",
            Mode::TandemUnsigned => "extender-unsigned",
            Mode::PluginUnsigned => "plugin-unsigned",
            Mode::TandemBefore => "extender-before",
            Mode::PluginBefore => "plugin-before",
        }
    }

    /// What the run's line says it measured.
    fn what(self) -> &'static str {
        match self {
            Mode::Default => "default kube-scheduler",
            Mode::Tandem => "kube-scheduler + Tandem extender",
            Mode::TandemHttp => "  ... over plain HTTP",
            Mode::TandemFitting => "  ... --filter-passes fitting",
            Mode::AdapterDown => "  ... with the adapter down",
            Mode::Plugin => "tandem-kube-scheduler (plugin)",
            Mode::TandemUnsigned => "  ... extender, placements unsigned",
            Mode::PluginUnsigned => "  ... plugin, placements unsigned",
            Mode::TandemBefore => "  ... extender, the older release",
            Mode::PluginBefore => "  ... plugin, the older release",
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    cluster::install_crypto_provider();
    let nodes = env_size("TANDEM_BENCH_NODES", 500);
    let gpus = env_size("TANDEM_BENCH_GPUS", 4);
    let pods = env_size("TANDEM_BENCH_PODS", 1_500);
    let rounds = env_size("TANDEM_BENCH_ROUNDS", 3).max(1);
    // Configurations named after `--` run alone (`-- default plugin`); cargo's own flags
    // (`--bench`) are not names. Every configuration runs by default.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let modes = [
        Mode::Default,
        Mode::Tandem,
        Mode::TandemHttp,
        Mode::TandemFitting,
        Mode::AdapterDown,
        Mode::Plugin,
        Mode::TandemUnsigned,
        Mode::PluginUnsigned,
        Mode::TandemBefore,
        Mode::PluginBefore,
    ];
    // The older release's runs need its programs: named, they must be there; by default they
    // run where they are.
    let needs = |mode: Mode| match mode {
        Mode::TandemBefore => Some(BEFORE_ADAPTER),
        Mode::PluginBefore => Some(BEFORE_PLUGIN),
        _ => None,
    };
    for mode in modes {
        if let Some(variable) = needs(mode)
            && before(variable).is_none()
            && only.iter().any(|n| n == mode.name())
        {
            bail!(
                "`{}` runs the program ${variable} names; set it",
                mode.name()
            );
        }
    }
    if let Some(unknown) = only.iter().find(|n| modes.iter().all(|m| m.name() != *n)) {
        let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
        bail!(
            "no configuration named `{unknown}` (configurations: {})",
            names.join(", ")
        );
    }
    println!(
        "kube-scheduler throughput: {nodes} nodes x {gpus} GPUs, {pods} one-GPU pods created before the scheduler starts"
    );
    // The default scheduler's own pods/s moves by a fifth between runs on two shared cores, so
    // every configuration runs `rounds` times, interleaved, and the ratios are of medians.
    let mut runs: std::collections::HashMap<Mode, Vec<Run>> = std::collections::HashMap::new();
    for round in 1..=rounds {
        for mode in modes {
            if !only.is_empty() && !only.iter().any(|n| n == mode.name()) {
                continue;
            }
            if needs(mode).is_some_and(|variable| before(variable).is_none()) {
                continue;
            }
            let measured = run(nodes, gpus, pods, mode).await.context(mode.what())?;
            report(&format!("{} [{round}/{rounds}]", mode.what()), &measured);
            runs.entry(mode).or_default().push(measured);
        }
    }
    // The median of what `of` measured in each run of `mode` (runs that measured nothing
    // left out).
    let median_of = |mode: Mode, of: fn(&Run) -> Option<f64>| -> Option<f64> {
        let mut values: Vec<f64> = runs.get(&mode)?.iter().filter_map(of).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let median = |mode: Mode| median_of(mode, |r| Some(r.pods_per_s()));
    // What every run of a configuration showed: the most pods any run left without Tandem's
    // annotation, or with an annotation naming another node.
    let worst = |mode: Mode, of: fn(&Run) -> usize| -> usize {
        runs.get(&mode)
            .map_or(0, |all| all.iter().map(of).max().unwrap_or(0))
    };
    let mib = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |m| format!("{m:.0} MiB"));
    for mode in modes {
        if let Some(rate) = median(mode) {
            let ready = median_of(mode, |r| Some(r.ready)).unwrap_or(f64::NAN);
            let p99 = median_of(mode, |r| r.attempt_p99)
                .map_or_else(|| "?".to_owned(), |s| format!("{:.0} ms", s * 1_000.0));
            println!(
                "{:<34} median {rate:>7.1} pods/s over {rounds} run(s), p99 attempt <= {p99}, ready after {ready:.2} s, peak RSS scheduler {} extender {}",
                mode.what(),
                mib(median_of(mode, |r| r.scheduler_mib)),
                mib(median_of(mode, |r| r.extender_mib)),
            );
        }
    }
    if let (Some(plugin), Some(default)) = (
        median_of(Mode::Plugin, |r| Some(r.ready)),
        median_of(Mode::Default, |r| Some(r.ready)),
    ) {
        println!(
            "plugin scheduler ready {:+.2} s after the default (goal: within 0.5 s)",
            plugin - default
        );
    }
    let default = median(Mode::Default);
    let share =
        |rate: f64| default.map_or_else(|| "?".to_owned(), |d| format!("{:.1}", 100.0 * rate / d));
    if let Some(downs) = runs.get(&Mode::AdapterDown) {
        for down in downs {
            println!(
                "adapter down: {} of {} pods bound by the scheduler's fallback (fail-open); the adapter started afterwards counted {} bound without its record",
                down.unannotated, down.pods, down.accounted
            );
        }
    }
    let extender = median(Mode::Tandem);
    if let Some(rate) = extender {
        println!(
            "Tandem extender / default: {}% of the default scheduler's pods/s (goal: at least 75%); \
             pods without Tandem's annotation: {} (goal 0); annotations naming another node's GPU: {}",
            share(rate),
            worst(Mode::Tandem, |r| r.unannotated),
            worst(Mode::Tandem, |r| r.misplaced)
        );
    }
    for (mode, what) in [
        (Mode::TandemHttp, "over plain HTTP"),
        (Mode::TandemFitting, "--filter-passes fitting"),
    ] {
        if let Some(rate) = median(mode) {
            println!(
                "Tandem extender, {what} / default: {}% of the default scheduler's pods/s; \
                 pods without Tandem's annotation: {} (goal 0); annotations naming another node's GPU: {}",
                share(rate),
                worst(mode, |r| r.unannotated),
                worst(mode, |r| r.misplaced)
            );
        }
    }
    if let Some(rate) = median(Mode::Plugin) {
        let against = extender.map_or_else(|| "?".to_owned(), |e| format!("{:.2}", rate / e));
        println!(
            "Tandem plugin / default: {}% of the default scheduler's pods/s (goal: at least 95%); \
             Tandem plugin / extender: {against}x; pods without Tandem's annotation: {} (goal 0); \
             annotations naming another node's GPU: {}",
            share(rate),
            worst(Mode::Plugin, |r| r.unannotated),
            worst(Mode::Plugin, |r| r.misplaced)
        );
    }
    for (now, then, what) in [
        (
            Mode::Tandem,
            Mode::TandemUnsigned,
            "extender, signed / unsigned placements",
        ),
        (
            Mode::Plugin,
            Mode::PluginUnsigned,
            "plugin, signed / unsigned placements",
        ),
        (
            Mode::Tandem,
            Mode::TandemBefore,
            "extender, this release / the older",
        ),
        (
            Mode::Plugin,
            Mode::PluginBefore,
            "plugin, this release / the older",
        ),
    ] {
        if let (Some(a), Some(b)) = (median(now), median(then)) {
            println!(
                "Tandem {what}: {:.2}x the pods/s ({a:.1} against {b:.1}); \
                 pods without Tandem's annotation: {} and {}; annotations naming another node's GPU: {} and {}",
                a / b,
                worst(now, |r| r.unannotated),
                worst(then, |r| r.unannotated),
                worst(now, |r| r.misplaced),
                worst(then, |r| r.misplaced)
            );
        }
    }
    Ok(())
}

fn report(what: &str, run: &Run) {
    let p99 = run
        .attempt_p99
        .map_or_else(|| "?".to_owned(), |s| format!("{:.1} ms", s * 1_000.0));
    println!(
        "{what:<34} {:>6} pods bound in {:>7.2} s = {:>7.1} pods/s, p99 attempt <= {p99}, ready after {:.2} s",
        run.pods,
        run.seconds,
        run.pods_per_s(),
        run.ready,
    );
    println!("{:<34} CPU per pod: {}", "", run.cpu_per_pod());
    println!("{:<34} attempts: {}", "", run.attempts);
    println!("{:<34} API requests per pod: {}", "", run.api_requests);
    if let Some(latency) = &run.extender_latency {
        println!("{:<34} extender: {latency}", "");
    }
}

/// The mean of histogram `name` whose labels are exactly `labels`, from Prometheus text.
fn histogram_mean(metrics: &str, name: &str, labels: &str) -> Option<f64> {
    let value = |suffix: &str| -> Option<f64> {
        let prefix = format!("{name}_{suffix}{{{labels}}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
    };
    let (sum, count) = (value("sum")?, value("count")?);
    (count > 0.0).then(|| sum / count)
}

/// The extender's mean time per verb as it answered them, and inside its engine calls: where
/// its share of each scheduling cycle goes.
fn extender_latency(metrics: &str) -> String {
    let ms =
        |mean: Option<f64>| mean.map_or_else(|| "-".to_owned(), |s| format!("{:.3} ms", s * 1e3));
    let verb = |verb: &str| {
        histogram_mean(
            metrics,
            "tandem_request_latency_seconds",
            &format!("verb=\"{verb}\""),
        )
    };
    let call = |call: &str| {
        histogram_mean(
            metrics,
            "tandem_engine_call_seconds",
            &format!("call=\"{call}\""),
        )
    };
    let calls = |verb: &str| {
        sum_of(
            metrics,
            "tandem_request_latency_seconds_count",
            &format!("verb=\"{verb}\""),
        )
    };
    format!(
        "mean filter {} (engine {}), prioritize {}, bind {} (engine {}); calls: filter {}, \
         bind {}; fail-opens {}, engine errors {}, timeouts {}, overloaded {}, view rebuilds {}",
        ms(verb("filter")),
        ms(call("filter")),
        ms(verb("prioritize")),
        ms(verb("bind")),
        ms(call("bind")),
        calls("filter"),
        calls("bind"),
        sum_of(metrics, "tandem_fail_opens_total", ""),
        sum_of(metrics, "tandem_engine_errors_total", ""),
        sum_of(metrics, "tandem_engine_timeouts_total", ""),
        sum_of(metrics, "tandem_engine_overloaded_total", ""),
        sum_of(metrics, "tandem_view_rebuilds_total", ""),
    )
}

/// The sum of the samples of metric `name` whose labels include `label` (every sample when
/// it is empty), from Prometheus text.
fn sum_of(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            let plain = labels.is_empty() || labels.starts_with('{');
            (plain && labels.contains(label)).then(|| value.parse::<f64>().ok())?
        })
        .fold(0.0, |sum, value| sum + value)
}

/// The API server's requests so far (`apiserver_request_total`), by verb, resource and
/// subresource (`POST pods/binding`): every process's writes and reads, whoever made them.
async fn api_requests(client: &kube::Client) -> Result<BTreeMap<String, f64>> {
    let request = axum::http::Request::get("/metrics").body(Vec::new())?;
    let metrics = client.request_text(request).await?;
    let mut counts = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let (resource, subresource) = (label("resource"), label("subresource"));
        let what = match subresource.as_str() {
            "" => format!("{} {resource}", label("verb")),
            sub => format!("{} {resource}/{sub}", label("verb")),
        };
        *counts.entry(what).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    Ok(counts)
}

/// The requests made between `before` and `after` per pod, the six most frequent first: what
/// a configuration asks of the API server (and so of etcd) for each pod it binds.
fn per_pod(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, pods: usize) -> String {
    let mut made: Vec<(&String, f64)> = after
        .iter()
        .map(|(what, n)| (what, n - before.get(what).copied().unwrap_or(0.0)))
        .filter(|&(_, n)| n > 0.0)
        .collect();
    made.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = made.iter().map(|(_, n)| n).sum();
    let pods = pods.max(1) as f64;
    let top: Vec<String> = made
        .iter()
        .take(6)
        .map(|(what, n)| format!("{what} {:.2}", n / pods))
        .collect();
    format!("{:.2} in all; {}", total / pods, top.join(", "))
}

/// The scheduler's scheduling attempts by result (`scheduler_schedule_attempts_total`): a pod
/// tried more than once costs every process again.
fn attempts(metrics: &str) -> String {
    ["scheduled", "unschedulable", "error"]
        .map(|result| {
            let label = format!("result=\"{result}\"");
            let total = sum_of(metrics, "scheduler_schedule_attempts_total", &label);
            format!("{result} {total}")
        })
        .join(", ")
}

/// The p99 of `scheduler_scheduling_attempt_duration_seconds` over every result and profile:
/// the upper bound of the first bucket holding 99% of the attempts.
fn attempt_p99(metrics: &str) -> Option<f64> {
    const NAME: &str = "scheduler_scheduling_attempt_duration_seconds";
    let mut buckets: BTreeMap<u64, f64> = BTreeMap::new();
    let mut count = 0.0;
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix(&format!("{NAME}_bucket{{")) {
            // The last `le="`: `profile="` ends in one too.
            let le = rest.rsplit_once("le=\"")?.1.split('"').next()?;
            let value: f64 = rest.rsplit(' ').next()?.parse().ok()?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            *buckets.entry(bound.to_bits()).or_default() += value;
        } else if let Some(rest) = line.strip_prefix(&format!("{NAME}_count")) {
            count += rest.rsplit(' ').next()?.parse::<f64>().ok()?;
        }
    }
    let mut bounds: Vec<(f64, f64)> = buckets
        .into_iter()
        .map(|(bits, cumulative)| (f64::from_bits(bits), cumulative))
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    bounds
        .into_iter()
        .find(|&(_, cumulative)| count > 0.0 && cumulative >= 0.99 * count)
        .map(|(bound, _)| bound)
}

/// With `TANDEM_BENCH_PPROF=<dir>`, takes CPU profiles of the scheduler and of kube-apiserver
/// over the first `TANDEM_BENCH_PPROF_SECONDS` (default 3) of the run into
/// `<dir>/<configuration>.pprof` and `<dir>/<configuration>.apiserver.pprof` (`go tool pprof
/// -top <file>` reads them; time spent in Rust shows as `runtime.cgocall`). The API server's
/// tells where a configuration's extra CPU there goes (the watches it serves, the requests it
/// decodes).
fn cpu_profile(cluster: &Cluster, mode: Mode) -> Option<tokio::task::JoinHandle<Result<()>>> {
    let dir = std::path::PathBuf::from(std::env::var_os("TANDEM_BENCH_PPROF")?);
    let seconds = env_size("TANDEM_BENCH_PPROF_SECONDS", 3);
    let path = format!("/debug/pprof/profile?seconds={seconds}");
    let scheduler = cluster.scheduler_url(&path)?;
    let apiserver = format!("{}{path}", cluster.server_url());
    let token = cluster.token().to_owned();
    Some(tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(true)
            .build()?;
        let fetch = |request: reqwest::RequestBuilder| async move {
            request.send().await?.error_for_status()?.bytes().await
        };
        let (scheduler, apiserver) = futures::try_join!(
            fetch(http.get(&scheduler)),
            fetch(http.get(&apiserver).bearer_auth(&token)),
        )?;
        std::fs::create_dir_all(&dir)?;
        for (profile, leaf, whose) in [
            (scheduler, format!("{}.pprof", mode.name()), "scheduler"),
            (
                apiserver,
                format!("{}.apiserver.pprof", mode.name()),
                "API server",
            ),
        ] {
            let path = dir.join(leaf);
            std::fs::write(&path, profile)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("CPU profile of the {whose}: {}", path.display());
        }
        Ok(())
    }))
}

/// CPU seconds (user and system) process `pid` has spent so far (`/proc/<pid>/stat`).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let user: f64 = fields.nth(11)?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    // Linux reports them in USER_HZ, which is 100 on every architecture it runs on.
    Some((user + system) / 100.0)
}

/// Peak resident memory of process `pid` (`VmHWM` in `/proc/<pid>/status`), MiB.
fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1_024.0)
}

async fn run(nodes: usize, gpus: usize, pods: usize, mode: Mode) -> Result<Run> {
    let gpus = u32::try_from(gpus).context("TANDEM_BENCH_GPUS is too large")?;
    let mut cluster = Cluster::start_control_plane().await?;
    let client = cluster.client().await?;
    futures::stream::iter(0..nodes)
        .map(|n| {
            let client = client.clone();
            async move {
                create_gpu_node(
                    &client,
                    &format!("gpu-node-{n:04}"),
                    gpus,
                    "Tesla-V100-SXM2-16GB",
                    16_384,
                )
                .await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(0..pods)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut pod = json!({
                    "metadata": { "name": format!("job-{i:05}"),
                                  "labels": { "tandem.dev/job": format!("job-{}", i % 50) } },
                    "spec": { "containers": [{
                        "name": "main", "image": "registry.invalid/none",
                        "resources": { "limits": { "nvidia.com/gpu": "1" } },
                    }]},
                });
                if matches!(
                    mode,
                    Mode::Plugin | Mode::PluginUnsigned | Mode::PluginBefore
                ) {
                    pod["spec"]["schedulerName"] = json!(PLUGIN_SCHEDULER_NAME);
                }
                let pod: Pod = serde_json::from_value(pod)?;
                api.create(&PostParams::default(), &pod).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    // Bound pods are counted from a watch: one event per binding, as any watcher gets.
    // Polling with lists instead cost the API server (on the same two cores) most in the
    // slowest configuration, where the most pods stay unbound, and so skewed the comparison.
    // The watch's initial list is taken before the scheduler starts.
    let mut events = std::pin::pin!(watcher(api.clone(), watcher::Config::default()));
    let mut bound_names = HashSet::new();
    loop {
        match events.try_next().await? {
            Some(watcher::Event::InitDone) => break,
            Some(_) => {}
            None => bail!("the pod watch ended before its initial list"),
        }
    }
    let port = free_port()?;
    // Certificates only where the scheduler is configured with the extender over TLS.
    let tls = match mode {
        Mode::Tandem
        | Mode::TandemFitting
        | Mode::AdapterDown
        | Mode::TandemUnsigned
        | Mode::TandemBefore => Some(MutualTls::write(
            cluster.dir(),
            &Authority::new("tandem-bench-ca")?,
        )?),
        Mode::Default
        | Mode::TandemHttp
        | Mode::Plugin
        | Mode::PluginUnsigned
        | Mode::PluginBefore => None,
    };
    let endpoint = AdapterEndpoint::new(port, tls.as_ref())?;
    let extender = Some(Extender {
        port,
        tls: tls.as_ref(),
        ignorable: true,
    });
    // From the scheduler's start: the extender, started and waited for first, is not in it.
    let mut starting = Instant::now();
    let mut adapter = match mode {
        Mode::Default => {
            cluster.start_scheduler(&scheduler_config(None)).await?;
            None
        }
        Mode::Tandem
        | Mode::TandemHttp
        | Mode::TandemFitting
        | Mode::TandemUnsigned
        | Mode::TandemBefore => {
            let adapter = start_adapter(&cluster, port, mode, tls.as_ref())?;
            endpoint.wait_ready().await?;
            starting = Instant::now();
            cluster
                .start_scheduler(&scheduler_config_with(extender))
                .await?;
            Some(adapter)
        }
        Mode::AdapterDown => {
            cluster
                .start_scheduler(&scheduler_config_with(extender))
                .await?;
            None
        }
        Mode::Plugin | Mode::PluginUnsigned | Mode::PluginBefore => {
            let binary = match before(BEFORE_PLUGIN).filter(|_| mode == Mode::PluginBefore) {
                Some(older) => older,
                None => plugin_scheduler().await?,
            };
            let secret = cluster.dir().join("id-secret");
            std::fs::write(&secret, SECRET_HEX)?;
            // Building the binary, the first time, is not starting it.
            starting = Instant::now();
            cluster
                .start_scheduler_binary(&binary, &plugin_config(&secret, mode))
                .await?;
            None
        }
    };
    // The scheduler was ready (informers synced) when `start_scheduler` returned; count from
    // there, as kube-scheduler's own throughput figures do.
    let started = Instant::now();
    let ready = (started - starting).as_secs_f64();
    let pids = [
        cluster.pid(Component::ApiServer),
        cluster.pid(Component::Etcd),
        cluster.pid(Component::Scheduler),
        adapter.as_ref().map(ChildProcess::id),
    ];
    let cpu_before = pids.map(|pid| pid.and_then(cpu_seconds));
    let requests_before = api_requests(&client).await?;
    let profile = cpu_profile(&cluster, mode);
    let limit = RUN_LIMIT.max(Duration::from_millis(50 * pods as u64));
    let deadline = tokio::time::Instant::from_std(started + limit);
    while bound_names.len() < pods {
        let event = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .map_err(|_| {
                anyhow!(
                    "only {} of {pods} pods bound after {limit:?}",
                    bound_names.len()
                )
            })??
            .context("the pod watch ended")?;
        if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event
            && pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        {
            bound_names.insert(pod.metadata.name.unwrap_or_default());
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let requests = per_pod(&requests_before, &api_requests(&client).await?, pods);
    let mut cpu = [None; PROCESSES.len()];
    for (i, pid) in pids.iter().enumerate() {
        cpu[i] = pid
            .and_then(cpu_seconds)
            .zip(cpu_before[i])
            .map(|(after, before)| after - before);
    }
    if let Some(profile) = profile {
        profile.await??;
    }
    let scheduler_mib = cluster.pid(Component::Scheduler).and_then(peak_rss_mib);
    let extender_mib = adapter.as_ref().and_then(|a| peak_rss_mib(a.id()));
    let extender_latency = match &adapter {
        Some(_) => Some(extender_latency(&endpoint.metrics().await?)),
        None => None,
    };
    let metrics = cluster.scheduler_metrics().await?;
    let attempt_p99 = attempt_p99(&metrics);
    let attempts = attempts(&metrics);
    if attempt_p99.is_none() {
        // Say what was there instead, so a renamed or relabelled metric is seen at once.
        let lines: Vec<&str> = metrics
            .lines()
            .filter(|l| l.contains("scheduling_attempt_duration"))
            .take(3)
            .collect();
        eprintln!("no scheduling-attempt p99 in the scheduler's metrics; its lines: {lines:?}");
    }
    let bound = api.list(&ListParams::default()).await?.items;
    let (mut unannotated, mut misplaced) = (0, 0);
    for pod in &bound {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        match pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("tandem.dev/gpu"))
        {
            None => unannotated += 1,
            Some(gpu) => {
                let on = gpu.split_once('/').map(|(node, _)| node);
                if on != node {
                    misplaced += 1;
                }
            }
        }
    }
    let mut accounted = 0;
    if mode == Mode::AdapterDown {
        adapter = Some(start_adapter(&cluster, port, mode, tls.as_ref())?);
        endpoint.wait_ready().await?;
        accounted = endpoint
            .metrics()
            .await?
            .lines()
            .find_map(|l| l.strip_prefix("tandem_binds_without_tandem_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
    }
    drop(adapter);
    drop(cluster);
    Ok(Run {
        seconds,
        pods: bound.len(),
        unannotated: if mode == Mode::Default {
            0
        } else {
            unannotated
        },
        misplaced,
        accounted,
        attempt_p99,
        attempts,
        ready,
        scheduler_mib,
        extender_mib,
        cpu,
        extender_latency,
        api_requests: requests,
    })
}

/// The plugin's profile.
const PLUGIN_SCHEDULER_NAME: &str = "tandem-plugin-scheduler";

/// `tandem-kube-scheduler` from `TANDEM_PLUGIN_SCHEDULER`, or built (minutes, the first time).
async fn plugin_scheduler() -> Result<std::path::PathBuf> {
    tokio::task::spawn_blocking(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the crate has no parent directory")?
            .to_path_buf();
        tandem_xtask::kube_plugin::plugin_scheduler_from_env(
            &root,
            tandem_xtask::kube_plugin::Profile::Release,
        )
    })
    .await
    .context("the task building tandem-kube-scheduler panicked")?
}

/// The plugin's `KubeSchedulerConfiguration`: the deploy file's profile, the e2e harness's
/// client limits, no leader election; placements signed with the cluster's key, except for
/// [`Mode::PluginUnsigned`] and the older release (which has no such option).
fn plugin_config(secret: &std::path::Path, mode: Mode) -> String {
    let placements = match mode {
        Mode::PluginUnsigned => ", unsignedPlacements: true".to_owned(),
        Mode::PluginBefore => String::new(),
        _ => format!(
            ", placementKeyFile: \"{}\"",
            cluster::PLACEMENT_KEY_PLACEHOLDER
        ),
    };
    format!(
        "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {}
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
profiles:
- schedulerName: {PLUGIN_SCHEDULER_NAME}
  plugins:
    multiPoint:
      enabled:
      - name: Tandem
        weight: 10
    bind:
      enabled:
      - name: Tandem
  pluginConfig:
  - name: Tandem
    args: {{idSecretFile: {}, namespace: {SYSTEM}{placements}}}
  - name: NodeResourcesFit
    args:
      ignoredResources: [\"nvidia.com/gpu\"]
",
        cluster::KUBECONFIG_PLACEHOLDER,
        secret.display(),
    )
}

/// `tandem-kube-adapter` with its default options (`--filter-passes fitting` for
/// [`Mode::TandemFitting`], `--unsigned-placements` for [`Mode::TandemUnsigned`]), serving
/// HTTPS with `tls`.
fn start_adapter(
    cluster: &Cluster,
    port: u16,
    mode: Mode,
    tls: Option<&MutualTls>,
) -> Result<ChildProcess> {
    let dir = cluster.dir();
    let secret = dir.join("id-secret");
    std::fs::write(&secret, SECRET_HEX)?;
    let program = match before(BEFORE_ADAPTER).filter(|_| mode == Mode::TandemBefore) {
        Some(older) => older,
        None => env!("CARGO_BIN_EXE_tandem-kube-adapter").into(),
    };
    let mut command = Command::new(program);
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--namespace", SYSTEM, "--identity", "bench-adapter"])
        .arg("--id-secret-file")
        .arg(&secret)
        .args(tls.map(MutualTls::adapter_args).unwrap_or_default())
        .env("RUST_LOG", "warn");
    match mode {
        Mode::TandemUnsigned => {
            command.arg("--unsigned-placements");
        }
        // The older release has no placement options.
        Mode::TandemBefore => {}
        // Every bind signs its placement, as the chart deploys it.
        _ => {
            command.args(cluster.placement_args());
        }
    }
    if mode == Mode::TandemFitting {
        command.args(["--filter-passes", "fitting"]);
    }
    spawn_logged(command, &dir.join("adapter.log"))
}

/// The adapter's probe and metrics endpoints, over HTTPS when it serves TLS.
struct AdapterEndpoint {
    base: String,
    http: reqwest::Client,
}

impl AdapterEndpoint {
    fn new(port: u16, tls: Option<&MutualTls>) -> Result<Self> {
        Ok(match tls {
            Some(tls) => Self {
                base: format!("https://127.0.0.1:{port}"),
                http: tls.probe_client()?,
            },
            None => Self {
                base: format!("http://127.0.0.1:{port}"),
                http: reqwest::Client::new(),
            },
        })
    }

    async fn wait_ready(&self) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Ok(r) = self.http.get(format!("{}/readyz", self.base)).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            ensure!(
                started.elapsed() < Duration::from_secs(60),
                "the adapter was not ready after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn metrics(&self) -> Result<String> {
        let response = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await?;
        Ok(response.text().await?)
    }
}
