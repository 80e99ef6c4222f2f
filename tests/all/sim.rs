//! Tandem in the simulator: the engine component in the loop, on the demo's inputs.

use std::collections::HashSet;
use std::sync::Mutex;
use std::thread::ThreadId;

use tandem_sim::policy::{Built, Known, PolicyName};
use tandem_sim::{
    Cluster, PolicyReport, Scenario, Settings, Trace, Truth, compare, demo, simulate,
};

/// Replays `trace` on `cluster` under the policy `name`, default settings.
fn replay(
    runtime: &tandem_host::Runtime,
    truth: &Truth,
    cluster: &Cluster,
    trace: &Trace,
    name: PolicyName,
) -> PolicyReport {
    let settings = Settings::default();
    let Built::Ready(mut policy) = name
        .build(&Known::of(truth), runtime, settings.seed)
        .unwrap()
    else {
        panic!("{name} does not apply");
    };
    simulate(
        truth,
        cluster,
        trace,
        &settings,
        policy.as_mut(),
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The demo (every policy, the whole trace) is what `tandem simulate` runs and the README
/// shows; here Tandem's balanced run is checked for the rules and the claims the demo makes.
#[test]
fn tandem_runs_the_demo_within_the_rules_and_beats_exclusive_fifo() {
    let runtime = super::engine_runtime();
    let truth = Truth::new(&demo::catalogs().unwrap()).unwrap();
    let (trace, cluster) = (demo::trace().unwrap(), demo::cluster().unwrap());
    let run = |name| replay(&runtime, &truth, &cluster, &trace, name);
    let fifo = run(PolicyName::ExclusiveFifo);
    let random = run(PolicyName::Random);
    let tandem = run(PolicyName::TandemBalanced);
    println!(
        "avg JCT h: fifo {:.2}, random {:.2}, tandem {:.2}; makespan h: fifo {:.1}, tandem {:.1}; \
         p95 IndSD %: random {:?}, tandem {:?}; tandem outcomes learned {}, OOMs {}",
        fifo.jct_s.mean / 3600.0,
        random.jct_s.mean / 3600.0,
        tandem.jct_s.mean / 3600.0,
        fifo.makespan_s / 3600.0,
        tandem.makespan_s / 3600.0,
        random.slowdown_pct.map(|s| s.p95),
        tandem.slowdown_pct.map(|s| s.p95),
        tandem.outcomes,
        tandem.ooms
    );
    assert_eq!(tandem.jobs, trace.jobs.len());
    // Known only by keyed ids, Tandem shares only what it saw share: never an OOM.
    assert_eq!(tandem.ooms, 0);
    assert!(tandem.shared_jobs > 0 && tandem.outcomes > 0);
    assert!(tandem.jct_s.mean < fifo.jct_s.mean);
    assert!(tandem.makespan_s <= fifo.makespan_s);
    let p95 = |r: &PolicyReport| r.slowdown_pct.map_or(0.0, |s| s.p95);
    assert!(p95(&tandem) < p95(&random));
}

/// Heterogeneity: the demo's GPUs listed slowest first. A blind first fit (FIFO, and Tandem told
/// no speeds) starts jobs on K80s while V100s sit idle; told the speeds and the work, Tandem
/// places by run time and is no longer at the mercy of the listing order.
#[test]
fn told_speeds_tandem_beats_fifo_and_its_blind_self_whatever_the_gpu_order() {
    let runtime = super::engine_runtime();
    let truth = Truth::new(&demo::catalogs().unwrap()).unwrap();
    let trace = demo::trace().unwrap();
    let cluster = Cluster::parse(
        "nodes,gpus_per_node,gpu_model\n4,4,K80\n4,4,P100\n4,4,V100\n",
        "k80-first.csv",
    )
    .unwrap();
    let run = |name| replay(&runtime, &truth, &cluster, &trace, name);
    let fifo = run(PolicyName::ExclusiveFifo);
    let blind = run(PolicyName::TandemBalancedBlind);
    let aware = run(PolicyName::TandemBalanced);
    println!(
        "K80 first, avg JCT / makespan h: fifo {:.2} / {:.1}, blind {:.2} / {:.1}, aware {:.2} / {:.1}",
        fifo.jct_s.mean / 3600.0,
        fifo.makespan_s / 3600.0,
        blind.jct_s.mean / 3600.0,
        blind.makespan_s / 3600.0,
        aware.jct_s.mean / 3600.0,
        aware.makespan_s / 3600.0,
    );
    assert_eq!(aware.ooms, 0);
    assert!(aware.jct_s.mean < blind.jct_s.mean && aware.jct_s.mean < fifo.jct_s.mean);
    assert!(aware.makespan_s < blind.makespan_s);
}

/// The memory guard in the loop: SchedTune's 48 declared CNN jobs (measured peaks per GPU
/// model, hidden from every policy) on 8 GiB, 11 GiB, 16 GiB and 24 GiB GPUs. Told the declared
/// models, Tandem never starts a job where it runs out of memory, under any objective;
/// withheld, it does what a memory-blind first fit does.
#[test]
fn with_declared_models_the_guard_prevents_every_oom() {
    let runtime = super::engine_runtime();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let catalog =
        tandem_catalog::Catalog::read(root.join("data/catalogs/schedtune-memory.json")).unwrap();
    let truth = Truth::new(&[catalog]).unwrap();
    let trace = Trace::read(root.join("sim/data/memory/trace.csv")).unwrap();
    let cluster = Cluster::read(root.join("sim/data/memory/cluster.csv")).unwrap();
    let run = |name| replay(&runtime, &truth, &cluster, &trace, name);
    let fifo = run(PolicyName::ExclusiveFifo);
    let guarded = run(PolicyName::TandemBalanced);
    let unguarded = run(PolicyName::TandemBalancedUndeclared);
    println!(
        "OOMs: exclusive-fifo {}, tandem-balanced (declared) {}, tandem-balanced-undeclared {}",
        fifo.ooms, guarded.ooms, unguarded.ooms
    );
    assert_eq!(guarded.jobs, trace.jobs.len());
    assert_eq!(guarded.ooms, 0);
    assert!(unguarded.ooms > 0 && fifo.ooms > 0);
    // Memory-blind, they overflow memory: this catalog time-slices the pairs it never
    // measured, so no failure is anything else.
    assert_eq!(unguarded.memory_ooms, unguarded.ooms);
    assert_eq!(fifo.memory_ooms, fifo.ooms);
    // Every objective keeps the promise, `max-packing` too, which shares.
    for objective in [PolicyName::TandemMinSlowdown, PolicyName::TandemMaxPacking] {
        let report = run(objective);
        println!(
            "{}: {} OOMs, {} jobs shared",
            objective.as_str(),
            report.ooms,
            report.shared_jobs
        );
        assert_eq!(report.ooms, 0, "{}", objective.as_str());
        if objective == PolicyName::TandemMaxPacking {
            assert!(report.shared_jobs > 0, "max-packing never shared a GPU");
        }
    }
}

/// Gavel measured no utilization; the models its job types declare let the engine predict one
/// for every type, so the utilization baselines run on the demo.
#[test]
fn the_engine_predicts_every_demo_types_utilization_from_its_declared_model() {
    let runtime = super::engine_runtime();
    let truth = Truth::new(&demo::catalogs().unwrap()).unwrap();
    let undeclared = Known::of(&truth);
    for name in [PolicyName::FfdUtil, PolicyName::LucidStyle] {
        assert!(matches!(
            name.build(&undeclared, &runtime, 1).unwrap(),
            Built::NotApplicable(_)
        ));
    }
    let mut known = Known::of(&truth);
    let declared = demo::declared_models().unwrap();
    let predicted = tandem_sim::utilization::predict(&runtime, &mut known, &declared).unwrap();
    assert_eq!(predicted, known.types.len());
    let utilization: Vec<f32> = known
        .types
        .iter()
        .map(|t| t.predicted_util_pct.unwrap())
        .collect();
    assert!(utilization.iter().all(|u| (0.0..=100.0).contains(u)));
    // The prediction follows the model: not one figure for every type.
    assert!(utilization.iter().any(|&u| u != utilization[0]));
    for name in [PolicyName::FfdUtil, PolicyName::LucidStyle] {
        assert!(matches!(
            name.build(&known, &runtime, 1).unwrap(),
            Built::Ready(_)
        ));
    }
}

/// `compare` replays its policies side by side; each has its own engine and sees nothing of
/// the others', so the report is the one of replaying them one after another, in the order
/// asked, wall times aside. The first 300 jobs of the demo keep it short.
#[test]
fn policies_replayed_side_by_side_report_what_they_report_one_by_one() {
    let runtime = super::engine_runtime();
    let truth = Truth::new(&demo::catalogs().unwrap()).unwrap();
    let cluster = demo::cluster().unwrap();
    let demo_trace = demo::trace().unwrap();
    let trace = Trace {
        jobs: demo_trace.jobs[..300].to_vec(),
        lines: demo_trace.lines[..300].to_vec(),
        ..demo_trace
    };
    let policies = [
        PolicyName::TandemMaxPacking,
        PolicyName::ExclusiveFifo,
        PolicyName::TandemBalanced,
        PolicyName::Random,
    ];
    let scenario = Scenario {
        truth: &truth,
        cluster: &cluster,
        cluster_name: "demo".into(),
        trace: &trace,
        trace_name: "demo, first 300 jobs".into(),
        declared: None,
    };
    let threads = Mutex::new(HashSet::<ThreadId>::new());
    let report = compare(
        &scenario,
        &Settings::default(),
        &policies,
        &runtime,
        "test".into(),
        &|_, _| {
            threads.lock().unwrap().insert(std::thread::current().id());
        },
    )
    .unwrap();
    let timeless = |mut r: PolicyReport| {
        r.decisions_per_s = 0.0;
        r.wall_s = 0.0;
        r
    };
    let side_by_side: Vec<PolicyReport> = report.policies.into_iter().map(timeless).collect();
    let one_by_one: Vec<PolicyReport> = policies
        .iter()
        .map(|&name| timeless(replay(&runtime, &truth, &cluster, &trace, name)))
        .collect();
    assert_eq!(side_by_side, one_by_one);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let used = threads.into_inner().unwrap().len();
    println!(
        "{used} threads replayed {} policies on {cores} cores",
        policies.len()
    );
    assert!(
        used > 1 || cores == 1,
        "one thread replayed every policy on {cores} cores"
    );
}
