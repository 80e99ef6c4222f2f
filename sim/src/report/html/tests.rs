//! Tests of the HTML report: the page's content and escaping, and the plots' shaping of the
//! data.

use plotters::style::RGBColor;

use super::page::{COLUMNS, html};
use super::plots::draw::short;
use super::plots::look::Look;
use super::plots::series::{Series, clip_x, sample_cdf, step_cdf, x_range};
use crate::metrics::{Collector, Inputs, PolicyReport, Report, TimePoint};
use crate::settings::Settings;

/// `text` as the page writes it in element content (maud's escaping).
fn escape(text: &str) -> String {
    maud::html! { (text) }.into_string()
}

/// A small deterministic generator (xorshift), so the tests need no RNG setup.
struct Draws(u64);

impl Draws {
    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Log-normal with the given median and spread.
    fn log_normal(&mut self, median: f64, sigma: f64) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
        median * (sigma * z).exp()
    }
}

/// A policy's report from a toy run: `jobs` one-GPU jobs arriving over three days (the
/// same trace for every policy) run first come, first served on `gpus` GPUs, `per_gpu` jobs
/// a GPU at most. A job that starts on a GPU already in use is slowed by a draw around
/// `slowdown` (a fraction); `seed` varies those draws between policies.
fn synthetic(
    name: &str,
    seed: u64,
    jobs: usize,
    gpus: usize,
    per_gpu: usize,
    slowdown: f64,
) -> PolicyReport {
    let mut trace = Draws(0x2545_F491_4F6C_DD1D);
    let mut draws = Draws(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut collector = Collector::new(jobs, None);
    // Each slot's time free; slot `k` is on GPU `k % gpus`, so GPUs fill before sharing.
    let mut free = vec![0.0_f64; gpus * per_gpu];
    // (time, change of queued, change of running) of every event.
    let mut events = Vec::new();
    let mut arrival = 0.0;
    for _ in 0..jobs {
        arrival += trace.log_normal(72.0 * 3600.0 / jobs as f64, 1.0);
        let solo = trace.log_normal(3600.0, 1.3);
        let (slot, _) = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        let start = free[slot].max(arrival);
        let shares = slot >= gpus;
        let slowed = shares.then(|| draws.log_normal(slowdown, 0.9));
        let finish = start + solo * (1.0 + slowed.unwrap_or(0.0));
        free[slot] = finish;
        collector.finished(arrival, start, finish, slowed);
        if shares {
            collector.packing_saving(draws.uniform() * 0.5);
        }
        events.extend([(arrival, 1, 0), (start, -1, 1), (finish, 0, -1)]);
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut queued, mut running, mut t) = (0_i64, 0_i64, 0.0);
    for (time, dq, dr) in events {
        let busy = (running as usize).min(gpus);
        collector.interval(t, time - t, busy, queued as usize, None);
        (queued, running, t) = (queued + dq, running + dr, time);
    }
    collector.decision(0.5, jobs);
    collector.report(name, gpus, 3.0)
}

fn report(command: &str, policies: Vec<PolicyReport>) -> Report {
    Report {
        command: command.to_owned(),
        inputs: Inputs {
            catalogs: vec![
                "data/catalogs/gavel-v100.json".into(),
                "data/catalogs/alnair-mps.json".into(),
            ],
            trace: "data/alibaba/trace-3d.csv".into(),
            jobs: 2000,
            cluster: "cluster.csv".into(),
            gpus: vec![("V100".into(), 32), ("K80".into(), 16)],
            predicted_utilization: None,
        },
        settings: Settings::default(),
        policies,
    }
}

/// Nine policies, as a full comparison runs them, and one that could not run.
fn realistic() -> Report {
    let names = [
        ("exclusive-fifo", 1, 0.0),
        ("random", 2, 0.6),
        ("ffd-util", 2, 0.45),
        ("lucid-style", 2, 0.3),
        ("schedtune-min-jct", 2, 0.35),
        ("jrs-ranking", 2, 0.4),
        ("tandem-balanced", 2, 0.2),
        ("tandem-min-slowdown", 2, 0.12),
        ("tandem-max-packing", 2, 0.28),
    ];
    let mut policies: Vec<PolicyReport> = names
        .iter()
        .enumerate()
        .map(|(i, &(name, per_gpu, slowdown))| {
            synthetic(name, i as u64 + 1, 2000, 48, per_gpu, slowdown)
        })
        .collect();
    policies.insert(
        3,
        PolicyReport::not_applicable(
            "gavel-like",
            "needs throughputs for every GPU model; K80 has none".into(),
        ),
    );
    report(
        "tandem-sim run --trace data/alibaba/trace-3d.csv --cluster cluster.csv --catalog data/catalogs/gavel-v100.json --catalog data/catalogs/alnair-mps.json --seed 1 --html report.html",
        policies,
    )
}

#[test]
fn the_page_shows_command_inputs_table_plots_and_guide_escaped() {
    let mut odd = synthetic("tandem<balanced>", 7, 300, 8, 2, 0.3);
    odd.not_applicable = None;
    let skipped =
        PolicyReport::not_applicable("gavel&co", "needs <throughputs> for \"K80\"".into());
    let page = html(&report(
        "tandem-sim run --trace 'a b.csv' --html <out>",
        vec![odd, skipped],
    ));

    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    assert!(page.contains("<h1>Tandem simulation report</h1>"));
    assert!(page.contains("<pre>tandem-sim run --trace 'a b.csv' --html &lt;out&gt;</pre>"));
    assert!(page.contains("reproduces every number"));
    // Inputs and every setting.
    for text in [
        "data/alibaba/trace-3d.csv",
        "2000 jobs",
        "48 GPUs",
        "32 × V100",
        "gavel-v100.json",
    ] {
        assert!(page.contains(text), "missing {text}");
    }
    for field in [
        "profile_window_s",
        "oom_after_s",
        "window",
        "history_share",
        "min_outcome_s",
        "seed",
    ] {
        assert!(
            page.contains(&format!("<th>{field}</th>")),
            "missing setting {field}"
        );
    }
    // The table has the terminal table's columns.
    for (column, _) in COLUMNS {
        assert!(
            page.contains(&format!(">{}</th>", escape(column))),
            "missing column {column}"
        );
    }
    // JCT CDF, utilization (with its queue companion) and slowdown CDF.
    assert_eq!(page.matches("<svg").count(), 4);
    for label in [
        "job completion time (h)",
        "share of jobs with JCT ≤ x",
        "time since the start of the trace (h)",
        "busy GPUs (% of cluster)",
        "jobs queued",
        "individual slowdown (%)",
        "share of shared jobs ≤ x",
    ] {
        assert!(page.contains(label), "missing axis label {label}");
    }
    // The name is escaped in the table and in the legend of every plot, never raw.
    assert!(!page.contains("tandem<balanced>"));
    assert!(page.matches("tandem&lt;balanced&gt;").count() >= 5);
    // The policy that could not run is listed with its reason, escaped, and not plotted.
    assert!(
        page.contains(
            "<strong>gavel&amp;co</strong>: needs &lt;throughputs&gt; for &quot;K80&quot;"
        )
    );
    assert_eq!(page.matches("gavel&amp;co").count(), 1);
    assert!(page.contains("How to read this") && page.contains("PacSav"));
    assert!(!page.contains("plot unavailable"));
}

#[test]
fn every_policy_of_a_full_run_gets_its_own_line() {
    let report = realistic();
    let page = html(&report);
    for p in report
        .policies
        .iter()
        .filter(|p| p.not_applicable.is_none())
    {
        // Table, JCT, utilization, queue and slowdown legends (exclusive-fifo never shares).
        let expected = if p.shared_jobs == 0 { 4 } else { 5 };
        let rows = page.matches(&format!("</span>{}</td>", p.policy)).count();
        let legends = page.matches(&format!(">\n{}\n</text>", p.policy)).count();
        assert_eq!((rows, legends), (1, expected - 1), "{}", p.policy);
    }
    assert!(
        page.contains("Not in this plot (no job shared a GPU): <strong>exclusive-fifo</strong>.")
    );
    // JCTs span several decades here: the x axis is logarithmic.
    assert!(page.contains("the x axis is logarithmic"));
    // Colour and dash together tell 40 policies apart.
    let looks: Vec<(RGBColor, Option<(u32, u32)>)> = (0..40)
        .map(|i| (Look::of(i).color, Look::of(i).dash))
        .collect();
    for (i, a) in looks.iter().enumerate() {
        assert!(looks[i + 1..].iter().all(|b| b != a), "look {i} repeats");
    }
}

#[test]
fn degenerate_reports_do_not_panic() {
    let mut empty = PolicyReport::not_applicable("empty", String::new());
    empty.not_applicable = None;
    // One job that took no time, on a run whose makespan is 0.
    let mut instant = Collector::new(1, None);
    instant.finished(0.0, 0.0, 0.0, Some(0.0));
    instant.interval(0.0, 0.0, 0, 0, None);
    let instant = instant.report("instant", 0, 0.0);
    let mut broken = PolicyReport::not_applicable("broken", String::new());
    broken.not_applicable = None;
    broken.jct_cdf = vec![(f64::NAN, 0.5), (f64::INFINITY, 1.0)];
    broken.slowdowns_pct = vec![f64::NAN, -5.0, -5.0];
    broken.timeline = vec![TimePoint {
        t_s: 0.0,
        busy_gpus_pct: f64::NAN,
        queued: 0.0,
    }];
    for policies in [vec![], vec![empty.clone()], vec![empty, instant, broken]] {
        let page = html(&report("", policies));
        assert!(page.ends_with("</html>\n"));
        assert!(!page.contains("plot unavailable"), "{page}");
    }
    let page = html(&report(
        "",
        vec![PolicyReport::not_applicable("only", "why".into())],
    ));
    assert!(page.contains("No policy could run") && !page.contains("<svg"));
}

#[test]
fn axes_and_ticks() {
    let series = |points: Vec<(f64, f64)>| Series {
        name: "p",
        look: Look::of(0),
        points,
    };
    assert!(x_range(&[series(vec![(0.1, 0.0), (50.0, 1.0)])], true).1);
    assert_eq!(
        x_range(&[series(vec![(1.0, 0.0), (50.0, 1.0)])], true),
        ((0.0, 50.0 * 1.03), false)
    );
    assert!(!x_range(&[series(vec![(0.0, 0.0), (50.0, 1.0)])], true).1);
    assert_eq!(
        x_range(&[series(vec![(2.0, 0.0)])], false),
        ((0.0, 2.06), false)
    );
    assert_eq!(
        x_range(&[series(vec![(0.0, 0.0)])], false),
        ((0.0, 1.0), false)
    );
    assert_eq!(x_range(&[], true), ((0.0, 1.0), false));
    let ticks: Vec<String> = [0.0, 0.001, 0.25, 1.0, 2.5, 12.5, 100.0, 1234.6, -20.0]
        .map(short)
        .to_vec();
    assert_eq!(
        ticks,
        [
            "0", "0.001", "0.25", "1", "2.5", "12.5", "100", "1235", "-20"
        ]
    );
    assert_eq!(
        step_cdf([(1.0, 0.5), (2.0, 1.0)]),
        [(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
    );
}

#[test]
fn long_samples_are_thinned_and_long_tails_cut() {
    let values: Vec<f64> = (0..1000).rev().map(f64::from).chain([f64::NAN]).collect();
    let points = sample_cdf(&values);
    assert!(points.len() <= 201);
    assert_eq!(
        (points[0], points.last().copied()),
        ((4.0, 0.005), Some((999.0, 1.0)))
    );
    assert!(sample_cdf(&[f64::NAN]).is_empty());
    let steps = step_cdf([(1.0, 0.5), (10.0, 1.0)]);
    assert_eq!(clip_x(&steps, 5.0), [(1.0, 0.0), (1.0, 0.5), (5.0, 0.5)]);
    assert_eq!(clip_x(&steps, 10.0), steps);
    // One job slowed by 5000% among many slowed by 10–20%: the axis is cut, and says so.
    let mut p = synthetic("p", 1, 300, 8, 2, 0.15);
    p.slowdowns_pct.push(5000.0);
    let page = html(&report("", vec![p]));
    assert!(page.contains("the largest slowdown is 5000%"));
}

/// Writes pages for a person to look at: `report.html`, a realistic comparison, and
/// `report-many.html`, fourteen policies (the palette repeats, with dashes) whose JCTs
/// span less than two decades (a linear axis). Run
/// `cargo test -p tandem-sim --lib report::html -- --ignored`, then open the files or
/// screenshot them with headless Chromium. They go to `/tmp`, or `TANDEM_REPORT_PREVIEW`.
#[test]
#[ignore = "writes preview files for a person to look at"]
fn write_preview_pages() {
    let dir = std::env::var("TANDEM_REPORT_PREVIEW").unwrap_or_else(|_| "/tmp".into());
    let dir = std::path::Path::new(&dir);
    std::fs::write(dir.join("report.html"), html(&realistic())).unwrap();
    let mut many = realistic();
    many.policies.retain(|p| p.not_applicable.is_none());
    let extra: Vec<PolicyReport> = many.policies[..5]
        .iter()
        .map(|p| PolicyReport {
            policy: format!("{}-with-a-rather-long-variant-name", p.policy),
            ..p.clone()
        })
        .collect();
    many.policies.extend(extra);
    for (i, p) in many.policies.iter_mut().enumerate() {
        // Squeeze the JCTs into 1–10 h, a little apart per policy.
        for point in &mut p.jct_cdf {
            point.0 = 3600.0 * (1.0 + 0.05 * i as f64 + point.0.ln_1p() / 2.0);
        }
    }
    std::fs::write(dir.join("report-many.html"), html(&many)).unwrap();
    eprintln!(
        "wrote report.html and report-many.html to {}",
        dir.display()
    );
}

#[test]
fn hostile_names_are_escaped_everywhere() {
    let hostile = "<script>alert('x')</script>";
    let mut ran = synthetic(hostile, 3, 200, 8, 2, 0.3);
    ran.not_applicable = None;
    let skipped = PolicyReport::not_applicable(&format!("skip{hostile}"), hostile.to_owned());
    let mut report = report(hostile, vec![ran, skipped]);
    report
        .inputs
        .catalogs
        .push(format!("data/catalogs/{hostile}.json"));
    report.inputs.trace = hostile.to_owned();
    report.inputs.cluster = hostile.to_owned();
    report.inputs.gpus.push((hostile.to_owned(), 1));
    let page = html(&report);
    // No script element at all: every occurrence is text, in the table, the inputs, the
    // command, the list of skipped policies and every plot's legend.
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("</script>"));
    // The page's own text (maud leaves apostrophes as they are in content) ...
    let escaped = "&lt;script&gt;alert('x')&lt;/script&gt;";
    assert!(page.matches(escaped).count() >= 8, "{page}");
    // ... and the legends of the four plots (plotters escapes apostrophes too).
    let in_svg = "&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt;";
    assert_eq!(page.matches(in_svg).count(), 4, "{page}");
    assert!(page.contains(&format!("<code>data/catalogs/{escaped}.json</code>")));
    assert!(page.contains(&format!("<strong>skip{escaped}</strong>: {escaped}</li>")));
}
