//! Scenarios with hand-computed answers: the simulator against the project's definitions.

use std::collections::BTreeMap;

use tandem_catalog::{Catalog, GpuModel, JobType, Pair, UnmeasuredPairs};
use tandem_sim::policy::{
    ExclusiveFifo, FfdUtilization, JrsRanking, Known, LucidStyle, Policy, RandomColocation,
    SchedTuneMinJct, Start, View,
};
use tandem_sim::{Cluster, Error, PolicyReport, Settings, Trace, Truth, simulate};

/// A catalog of one GPU model (`G`, 16 GiB) where every type does 1 step/s alone, and the
/// given pairs with their speeds.
fn catalog(types: &[&str], pairs: &[(&str, &str, f64, f64)]) -> Catalog {
    Catalog::new(
        "scenario",
        "hand-written for tests",
        vec![GpuModel {
            model: "G".into(),
            memory_mib: 16_384,
        }],
        types
            .iter()
            .map(|name| JobType {
                name: (*name).into(),
                profile: None,
                declared: None,
                solo_throughput: BTreeMap::from([("G".to_owned(), 1.0)]),
                solo_time_s: BTreeMap::new(),
                gpu_util_pct_approx: Some(40.0),
                peak_mem_mib: Default::default(),
            })
            .collect(),
        pairs
            .iter()
            .map(|&(a, b, speed_a, speed_b)| Pair {
                gpu_model: "G".into(),
                a: a.into(),
                b: b.into(),
                speed_a,
                speed_b,
                colocated_time_s: None,
            })
            .collect(),
    )
    .unwrap()
}

fn cluster(gpus: u32) -> Cluster {
    Cluster::parse(
        &format!("nodes,gpus_per_node,gpu_model\n1,{gpus},G\n"),
        "cluster",
    )
    .unwrap()
}

fn trace(rows: &[(f64, &str, f64)]) -> Trace {
    let mut text = String::from("arrival_s,job_type,gpus,steps\n");
    for (arrival, job_type, steps) in rows {
        text.push_str(&format!("{arrival},{job_type},1,{steps}\n"));
    }
    Trace::parse(&text, "trace").unwrap()
}

/// Types count as profiled on arrival, and every pair that shares is reported.
fn settings() -> Settings {
    Settings {
        profile_window_s: 0.0,
        history_share: 0.0,
        min_outcome_s: 0.0,
        ..Settings::default()
    }
}

/// Puts every job on the first GPU it may use: one it may join (two per GPU), else an idle one.
struct Greedy;

impl Policy for Greedy {
    fn name(&self) -> &str {
        "greedy"
    }

    fn decide(&mut self, view: &View<'_>) -> tandem_sim::Result<Vec<Start>> {
        let mut taken = vec![0usize; view.gpus.len()];
        let mut starts = Vec::new();
        for job in view.queue {
            let alone = job.alone || !job.profiled;
            let g = (0..view.gpus.len()).find(|&g| {
                let n = view.gpus[g].residents.len() + taken[g];
                n == 0 || (!alone && n < 2 && view.gpus[g].residents.iter().all(|r| r.shareable))
            });
            if let Some(g) = g {
                taken[g] += 1;
                starts.push(Start {
                    job: job.id,
                    gpus: vec![g],
                });
            }
        }
        Ok(starts)
    }
}

fn run(truth: &Truth, cluster: &Cluster, trace: &Trace, policy: &mut dyn Policy) -> PolicyReport {
    simulate(truth, cluster, trace, &settings(), policy, &mut |_| {}).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn exclusive_fifo_jct_is_solo_time_plus_queueing() {
    let truth = Truth::new(&[catalog(&["A", "B"], &[])]).unwrap();
    // One GPU. A (100 s) arrives at 0 and runs at once; B (50 s) arrives at 10 and waits 90 s.
    let trace = trace(&[(0.0, "A", 100.0), (10.0, "B", 50.0)]);
    let report = run(&truth, &cluster(1), &trace, &mut ExclusiveFifo);
    assert_eq!(report.jobs, 2);
    // JCTs 100 and 90 + 50 = 140.
    assert!(close(report.jct_s.mean, 120.0), "{:?}", report.jct_s);
    assert!(close(report.jct_s.p95, 140.0));
    assert!(close(report.queueing_s.mean, 45.0));
    assert!(close(report.makespan_s, 150.0));
    // Busy all 150 s.
    assert!(close(report.gpu_util_pct, 100.0));
    assert_eq!((report.shared_jobs, report.ooms, report.groups), (0, 0, 0));
}

#[test]
fn two_jobs_sharing_reproduce_the_definitions() {
    // DESIGN's definitions: A 100 s and B 50 s alone, at speeds 0.5 and 0.8 together. B ends
    // at 62.5 s; A has done 31.25 s of work and runs its other 68.75 s alone: 131.25 s.
    let truth = Truth::new(&[catalog(&["A", "B"], &[("A", "B", 0.5, 0.8)])]).unwrap();
    let trace = trace(&[(0.0, "A", 100.0), (0.0, "B", 50.0)]);
    let report = run(&truth, &cluster(1), &trace, &mut Greedy);
    assert!(close(report.makespan_s, 131.25), "{}", report.makespan_s);
    let mut slowdowns = report.slowdowns_pct.clone();
    slowdowns.sort_by(f64::total_cmp);
    // IndSD = (J_c - J_a) / J_a: B (62.5 - 50) / 50 = 25%, A (131.25 - 100) / 100 = 31.25%.
    assert_eq!(slowdowns.len(), 2);
    assert!(
        close(slowdowns[0], 25.0) && close(slowdowns[1], 31.25),
        "{slowdowns:?}"
    );
    // PacSav = (Σ J_a - max J_c) / Σ J_a = (150 - 131.25) / 150 = 12.5%.
    let saving = report.packing_saving_pct.unwrap();
    assert_eq!(report.groups, 1);
    assert!(close(saving.mean, 12.5), "{saving:?}");
    // Their 62.5 s together were reported as an outcome.
    assert_eq!(report.outcomes, 1);
}

#[test]
fn an_unmeasured_pair_fails_with_an_oom_and_runs_again_alone() {
    // A and C were never measured together: C joins A, fails after 60 s, loses its work and
    // waits for the GPU to run alone: A ends at 100, C runs 100..150.
    let truth = Truth::new(&[catalog(&["A", "C"], &[])]).unwrap();
    let trace = trace(&[(0.0, "A", 100.0), (0.0, "C", 50.0)]);
    let report = run(&truth, &cluster(1), &trace, &mut Greedy);
    assert_eq!(report.ooms, 1);
    // It failed as a pair never measured, not for want of memory.
    assert_eq!(report.memory_ooms, 0);
    assert!(close(report.makespan_s, 150.0), "{}", report.makespan_s);
    // JCT of C: 150 s, of which 60 lost; queueing counts from arrival to the first start.
    assert!(close(report.jct_s.p95, 150.0));
    assert!(close(report.queueing_s.mean, 0.0));
    assert_eq!(report.shared_jobs, 0);
}

#[test]
fn a_catalog_that_time_slices_unmeasured_pairs_runs_them_at_half_speed() {
    // The same pair in a catalog that says its unmeasured pairs time-slice: A and C run
    // together at half speed. C (50 s) ends at 100 s; A has done 50 s of its 100 and runs the
    // rest alone: 150 s. Nothing is saved, nothing fails, and the outcome is reported.
    let sliced = catalog(&["A", "C"], &[]).with_unmeasured_pairs(UnmeasuredPairs::TimeSliced);
    let truth = Truth::new(std::slice::from_ref(&sliced)).unwrap();
    let trace = trace(&[(0.0, "A", 100.0), (0.0, "C", 50.0)]);
    let report = run(&truth, &cluster(1), &trace, &mut Greedy);
    assert_eq!(
        (report.ooms, report.shared_jobs, report.outcomes),
        (0, 2, 1)
    );
    assert!(close(report.makespan_s, 150.0), "{}", report.makespan_s);
    let saving = report.packing_saving_pct.unwrap();
    assert!(close(saving.mean, 0.0), "{saving:?}");
    // One GPU model cannot follow both rules: the error names the model and the catalogs.
    let error = Truth::new(&[sliced, catalog(&["A"], &[])]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("GPU model G: unmeasured pairs time-slice in catalog scenario but cannot share in scenario"),
        "{error}"
    );
}

#[test]
fn a_type_is_profiled_alone_before_it_may_share() {
    let truth = Truth::new(&[catalog(&["A"], &[("A", "A", 0.9, 0.9)])]).unwrap();
    let trace = trace(&[(0.0, "A", 1_000.0), (0.0, "A", 1_000.0)]);
    let with_window = Settings {
        profile_window_s: 300.0,
        ..settings()
    };
    // One GPU: the second job waits out the first one's 300 s window, then joins it.
    let report = simulate(
        &truth,
        &cluster(1),
        &trace,
        &with_window,
        &mut Greedy,
        &mut |_| {},
    )
    .unwrap();
    assert!(
        close(report.queueing_s.p95, 300.0),
        "{:?}",
        report.queueing_s
    );
    assert_eq!(report.shared_jobs, 2);

    /// Ignores the rule.
    struct Pushy;
    impl Policy for Pushy {
        fn name(&self) -> &str {
            "pushy"
        }
        fn decide(&mut self, view: &View<'_>) -> tandem_sim::Result<Vec<Start>> {
            Ok(view
                .queue
                .iter()
                .map(|j| Start {
                    job: j.id,
                    gpus: vec![0],
                })
                .collect())
        }
    }
    let error = simulate(
        &truth,
        &cluster(1),
        &trace,
        &with_window,
        &mut Pushy,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(error, Error::Policy { .. }), "{error}");
    assert!(error.to_string().contains("must run alone"), "{error}");
}

#[test]
fn the_same_seed_gives_the_same_results() {
    let truth = Truth::new(&[catalog(
        &["A", "B", "C"],
        &[
            ("A", "B", 0.7, 0.6),
            ("A", "A", 0.5, 0.5),
            ("B", "C", 0.9, 0.4),
        ],
    )])
    .unwrap();
    let rows: Vec<(f64, &str, f64)> = (0..60)
        .map(|i| {
            (
                f64::from(i) * 7.0,
                ["A", "B", "C"][i as usize % 3],
                100.0 + f64::from(i % 7) * 50.0,
            )
        })
        .collect();
    let trace = trace(&rows);
    let figures = |seed: u64| {
        let settings = Settings {
            seed,
            history_share: 0.5,
            ..settings()
        };
        let mut policy = RandomColocation::new(seed);
        let r = simulate(
            &truth,
            &cluster(3),
            &trace,
            &settings,
            &mut policy,
            &mut |_| {},
        )
        .unwrap();
        (r.jct_s, r.makespan_s, r.ooms, r.slowdowns_pct, r.timeline)
    };
    assert_eq!(figures(7), figures(7));
    assert_ne!(figures(7), figures(8));
}

#[test]
fn every_baseline_runs_and_keeps_the_rules() {
    let truth = Truth::new(&[catalog(
        &["A", "B", "C"],
        &[
            ("A", "B", 0.7, 0.6),
            ("A", "A", 0.5, 0.5),
            ("B", "C", 0.9, 0.4),
        ],
    )])
    .unwrap();
    let rows: Vec<(f64, &str, f64)> = (0..90)
        .map(|i| {
            (
                f64::from(i) * 5.0,
                ["A", "B", "C"][i as usize % 3],
                200.0 + f64::from(i % 5) * 80.0,
            )
        })
        .collect();
    let trace = trace(&rows);
    let known = Known::of(&truth);
    let settings = Settings {
        history_share: 1.0,
        ..Settings::default()
    };
    let mut policies: Vec<Box<dyn Policy>> = vec![
        Box::new(ExclusiveFifo),
        Box::new(RandomColocation::new(1)),
        Box::new(FfdUtilization::new(&known).unwrap()),
        Box::new(SchedTuneMinJct),
        Box::new(JrsRanking::default()),
        Box::new(LucidStyle::new(&known).unwrap()),
    ];
    for policy in &mut policies {
        let report = simulate(
            &truth,
            &cluster(4),
            &trace,
            &settings,
            policy.as_mut(),
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{}: {e}", policy.name()));
        assert_eq!(report.jobs, 90, "{}", policy.name());
        // JRS only ever pairs what it saw save time: never an unmeasured pair.
        if policy.name() == "jrs-ranking" {
            assert_eq!(report.ooms, 0);
            assert!(report.shared_jobs > 0);
        }
        if policy.name() == "exclusive-fifo" || policy.name() == "schedtune-min-jct" {
            assert_eq!(report.shared_jobs, 0);
        }
    }
}

#[test]
fn inputs_are_checked_against_the_catalogs_with_their_lines() {
    let truth = Truth::new(&[catalog(&["A"], &[])]).unwrap();
    let unknown = trace(&[(0.0, "A", 10.0), (1.0, "Z", 10.0)]);
    let error = simulate(
        &truth,
        &cluster(1),
        &unknown,
        &settings(),
        &mut ExclusiveFifo,
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert_eq!(error, "trace:3: unknown job type `Z` (not in the catalogs)");
    let elsewhere =
        Cluster::parse("nodes,gpus_per_node,gpu_model\n1,1,G\n2,2,H100\n", "c.csv").unwrap();
    let error = simulate(
        &truth,
        &elsewhere,
        &trace(&[(0.0, "A", 1.0)]),
        &settings(),
        &mut ExclusiveFifo,
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("c.csv:3: GPU model `H100` is not in the catalogs"),
        "{error}"
    );
    let mut wide = String::from("arrival_s,job_type,gpus,steps\n0,A,4,10\n");
    wide.push_str("1,A,1,10\n");
    let wide = Trace::parse(&wide, "w.csv").unwrap();
    let error = simulate(
        &truth,
        &cluster(2),
        &wide,
        &settings(),
        &mut ExclusiveFifo,
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("w.csv:2: job type `A` needing 4 GPU(s) can run nowhere"),
        "{error}"
    );
}

proptest::proptest! {
    /// Whatever the bytes, parsing a trace or a cluster file answers, never panics; and a
    /// trace that parses is sorted, positive and at least one GPU per job.
    #[test]
    fn any_text_parses_or_is_refused_without_panicking(text in "(arrival_s,job_type,gpus,steps\n)?([-0-9a-z.,\" \n]{0,200})") {
        if let Ok(trace) = Trace::parse(&text, "fuzz") {
            proptest::prop_assert!(trace.jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
            proptest::prop_assert!(trace.jobs.iter().all(|j| j.gpus >= 1 && j.steps > 0.0 && j.arrival_s >= 0.0));
        }
        let _ = Cluster::parse(&text.replace("arrival_s,job_type,gpus,steps", "nodes,gpus_per_node,gpu_model"), "fuzz");
    }
}
