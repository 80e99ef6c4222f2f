//! Cost of engine calls through the component and natively, for the same inputs, in one run.
//!
//! `cargo bench -p tandem-tests --bench recommend` (or `cargo xtask bench`) prints, per case,
//! the median, p99 and mean of many calls each way and the component/native ratio. The ratio
//! is the price of the sandbox: argument copying across the canonical ABI plus wasm code
//! generation. No assertion is made on time; the numbers are for people.
//!
//! The cluster view cases (WIT 0.4.0) score one job over 5,000 and 40,000 GPUs (scheduler_perf's
//! 5,000 nodes × 8) that the engine keeps, half of them running one or two instances of 64
//! profiled workloads: for a job class whose answers are kept (`warm`), for a new class every
//! call (`cold`: every state judged), and after one GPU changed state (`after a bind`: one
//! state judged); the view update of one pod event (a bind or an unbind) is timed alone.
//! `score` over the same GPUs sent as records (the WIT 0.3.0 way) runs beside them, so the
//! speed-up prints as a ratio. The largest batch, `recommend` of 10,000 jobs over 5,000 GPUs,
//! is timed over a few calls.

use std::time::{Duration, Instant};

use tandem_api::{Binding, ClusterChange, Gpu, Job, Objective, Outcome, Policy, Unbinding};
use tandem_host::{HostConfig, Runtime};
use tandem_tests::{busy_cluster, cluster, components, queue};

/// Latency statistics of one way of calling.
struct Stats {
    median: Duration,
    p99: Duration,
    mean: Duration,
}

/// Calls `f` for about `budget` (at least `min_calls` times) after a short warm-up.
fn measure(budget: Duration, min_calls: usize, mut f: impl FnMut()) -> Stats {
    for _ in 0..3 {
        f();
    }
    let mut samples = Vec::new();
    let started = Instant::now();
    while samples.len() < min_calls || started.elapsed() < budget {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p99: at(0.99),
        mean: samples.iter().sum::<Duration>() / samples.len() as u32,
    }
}

/// Times `calls` calls of `f` after one warm-up: for calls that take seconds.
fn measure_few(calls: usize, mut f: impl FnMut()) -> Stats {
    f();
    let mut samples: Vec<Duration> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort_unstable();
    Stats {
        median: samples[samples.len() / 2],
        p99: samples[samples.len() - 1],
        mean: samples.iter().sum::<Duration>() / samples.len() as u32,
    }
}

fn report(case: &str, component: &Stats, native: &Stats) {
    println!(
        "{case:<38} component: median {:>10.3?} p99 {:>10.3?} mean {:>10.3?} | native: median {:>10.3?} p99 {:>10.3?} mean {:>10.3?} | ratio (median) {:.2}x",
        component.median,
        component.p99,
        component.mean,
        native.median,
        native.p99,
        native.mean,
        component.median.as_secs_f64() / native.median.as_secs_f64(),
    );
}

/// Measures `recommend` of `jobs` on `gpus` `calls` times each way, the component's and the
/// native engine's (`engines`), and reports them as `case`: for cases of many milliseconds.
fn report_recommend_few(
    case: &str,
    calls: usize,
    engines: (&mut tandem_host::Recommender, &tandem_engine::Recommender),
    (jobs, gpus): (&[Job], &[Gpu]),
) {
    let (component, native) = engines;
    let c = measure_few(calls, || {
        component.recommend(jobs, gpus).expect("recommend");
    });
    let n = measure_few(calls, || {
        native.recommend(jobs, gpus).expect("recommend");
    });
    report(case, &c, &n);
}

fn main() {
    let runtime = Runtime::from_file(components::ENGINE.as_ref(), HostConfig::default())
        .expect("the engine component loads");
    let policy = Policy {
        max_jobs_per_gpu: 2,
        ..Policy::default()
    };
    let mut component = runtime.create(&policy, 42).expect("create");
    let native = tandem_engine::Recommender::new(policy, 42).expect("create");
    let budget = Duration::from_secs(2);

    for (jobs, gpus) in [(100, 50), (1_000, 1_000)] {
        let (queue, gpus_list) = (queue(jobs, 1), cluster(gpus));
        assert_eq!(
            component.recommend(&queue, &gpus_list).expect("recommend"),
            native.recommend(&queue, &gpus_list).expect("recommend"),
            "both ways give the same answer"
        );
        let c = measure(budget, 10, || {
            component.recommend(&queue, &gpus_list).expect("recommend");
        });
        let n = measure(budget, 10, || {
            native.recommend(&queue, &gpus_list).expect("recommend");
        });
        report(&format!("recommend {jobs} jobs x {gpus} GPUs"), &c, &n);
    }
    // The largest queue the pairing phase matches (600 jobs: 179,700 candidate pairs), under
    // `max-packing`, which values each pair by its expectation over the predictions'
    // uncertainty once an outcome was observed (before, it takes the predictions as they are):
    // one outcome of two other jobs, so that the expectation is what is measured.
    let packing = Policy {
        objective: Objective::MaxPacking,
        max_jobs_per_gpu: 2,
        ..Policy::default()
    };
    let mut component_packing = runtime.create(&packing, 42).expect("create");
    let mut native_packing = tandem_engine::Recommender::new(packing, 42).expect("create");
    let outcome = Outcome {
        gpu_model: "V100".into(),
        jobs: vec!["warm-a".into(), "warm-b".into()],
        solo_s: vec![100.0, 100.0],
        colocated_s: vec![130.0, 120.0],
    };
    component_packing
        .observe_outcome(&outcome)
        .expect("observe-outcome");
    native_packing
        .observe_outcome(&outcome)
        .expect("observe-outcome");
    report_recommend_few(
        "recommend 600 jobs x 300 GPUs, max-packing",
        5,
        (&mut component_packing, &native_packing),
        (&queue(600, 1), &cluster(300)),
    );

    // A cluster-wide batch at scheduler_perf's scale: seconds a call, so a few calls each way.
    report_recommend_few(
        "recommend 10000 jobs x 5000 GPUs",
        3,
        (&mut component, &native),
        (&queue(10_000, 1), &cluster(5_000)),
    );

    let job = &queue(1, 2)[0];
    let gpus_list = cluster(5_000);
    let c = measure(budget, 50, || {
        component.score(job, &gpus_list).expect("score");
    });
    let n = measure(budget, 50, || {
        native.score(job, &gpus_list).expect("score");
    });
    report("score 1 job x 5000 idle GPUs (records)", &c, &n);

    for gpus in [5_000, 40_000] {
        view_cases(&runtime, gpus, budget);
    }
}

/// The cluster view: `size` GPUs, half busy, kept by the engine.
fn view_cases(runtime: &Runtime, size: usize, budget: Duration) {
    let (profiles, changes) = busy_cluster(size, 64, 7);
    let mut component = runtime
        .bootstrap(&Policy::default(), 42)
        .expect("bootstrap");
    let mut native =
        tandem_engine::Recommender::bootstrap(Policy::default(), 42).expect("bootstrap");
    for (id, profile) in &profiles {
        component.observe_profile(id, profile).expect("observe");
        native
            .observe_profile(id, profile.clone())
            .expect("observe");
    }
    let summary = component.update_cluster(&changes).expect("update-cluster");
    native.update_cluster(&changes).expect("update-cluster");
    println!(
        "cluster view: {} GPUs on {} nodes, {} distinct states",
        summary.gpus, summary.nodes, summary.states
    );
    let gpus: Vec<Gpu> = changes
        .iter()
        .filter_map(|c| match c {
            ClusterChange::SetGpu(entry) => Some(entry.gpu.clone()),
            _ => None,
        })
        .collect();
    let job = queue(1, 2).remove(0);
    assert_eq!(
        component.score_all(&job).expect("score-all"),
        native.score_all(&job).expect("score-all"),
        "both ways give the same answer"
    );
    // The same job through the stateless call, GPUs sent as records (WIT 0.3.0's way).
    let c = measure(budget, 20, || {
        component.score(&job, &gpus).expect("score");
    });
    let n = measure(budget, 20, || {
        native.score(&job, &gpus).expect("score");
    });
    report(&format!("score 1 job x {size} busy GPUs (records)"), &c, &n);
    let records = c;
    let c = measure(budget, 50, || {
        component.score_all(&job).expect("score-all");
    });
    let n = measure(budget, 50, || {
        native.score_all(&job).expect("score-all");
    });
    report(&format!("score-all {size} busy GPUs, warm class"), &c, &n);
    let warm = c;
    // A job class never seen: every state is judged. Classes differ by profile.
    let fresh = |i: &mut u32| {
        *i += 1;
        let mut job = job.clone();
        if let Some(p) = &mut job.profile {
            p.gpu_util_pct = 5.0 + (*i % 8_000) as f32 / 100.0;
        }
        job
    };
    let (mut ci, mut ni) = (0, 0);
    let c = measure(budget, 50, || {
        component.score_all(&fresh(&mut ci)).expect("score-all");
    });
    let n = measure(budget, 50, || {
        native.score_all(&fresh(&mut ni)).expect("score-all");
    });
    report(&format!("score-all {size} busy GPUs, cold class"), &c, &n);
    let speedup = |view: &Stats| records.median.as_secs_f64() / view.median.as_secs_f64();
    println!(
        "{size} GPUs, view vs records (WIT 0.4.0 vs 0.3.0, component medians): warm class {:.0}x, cold class {:.1}x faster; budget 1 ms p99: cold p99 {:.3?}",
        speedup(&warm),
        speedup(&c),
        c.p99
    );
    // A scheduler's loop: a job binds to a GPU (one state changes), the next pod of the same
    // class is scored; then it leaves again.
    let resident = Job::new("w0~bench");
    let toggle = |bound: &mut bool| {
        *bound = !*bound;
        if *bound {
            ClusterChange::Bind(Binding {
                gpu: 1,
                job: resident.clone(),
            })
        } else {
            ClusterChange::Unbind(Unbinding {
                gpu: 1,
                job: resident.id.clone(),
            })
        }
    };
    // One pod event alone: the view update a scheduler's informer makes per bind or unbind.
    let (mut cb, mut nb) = (false, false);
    let c = measure(budget, 200, || {
        component
            .update_cluster(&[toggle(&mut cb)])
            .expect("update-cluster");
    });
    let n = measure(budget, 200, || {
        native
            .update_cluster(&[toggle(&mut nb)])
            .expect("update-cluster");
    });
    report(&format!("update-cluster 1 pod event, {size} GPUs"), &c, &n);
    println!(
        "{size} GPUs, view update per pod event: component p99 {:.3?} (budget 20 µs)",
        c.p99
    );
    // (The toggles go on from where the loop above left them: a job binds where it is not.)
    let c = measure(budget, 50, || {
        component
            .update_cluster(&[toggle(&mut cb)])
            .expect("update-cluster");
        component.score_all(&job).expect("score-all");
    });
    let n = measure(budget, 50, || {
        native
            .update_cluster(&[toggle(&mut nb)])
            .expect("update-cluster");
        native.score_all(&job).expect("score-all");
    });
    report(&format!("bind + score-all {size} busy GPUs, warm"), &c, &n);
}
