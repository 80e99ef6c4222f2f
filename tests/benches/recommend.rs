//! Cost of engine calls through the component and natively, for the same inputs, in one run.
//!
//! `cargo bench -p tandem-tests --bench recommend` (or `cargo xtask bench`) prints, per case,
//! the median, p99 and mean of many calls each way and the component/native ratio. The ratio
//! is the price of the sandbox: argument copying across the canonical ABI plus wasm code
//! generation. No assertion is made on time; the numbers are for people.

use std::time::{Duration, Instant};

use tandem_api::Policy;
use tandem_host::{HostConfig, Runtime};
use tandem_tests::{cluster, components, queue};

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

    let job = &queue(1, 2)[0];
    let gpus_list = cluster(5_000);
    let c = measure(budget, 50, || {
        component.score(job, &gpus_list).expect("score");
    });
    let n = measure(budget, 50, || {
        native.score(job, &gpus_list).expect("score");
    });
    report("score 1 job x 5000 GPUs", &c, &n);
}
