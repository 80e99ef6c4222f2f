//! The simulator's speed on the budget's case (docs/BENCHMARKS.md): a 15,000-job trace on a 100+ GPU
//! cluster, under 5 s on 2 cores.
//!
//! `cargo bench -p tandem-tests --bench simulate` (or `cargo xtask bench`) replays all 15 of
//! Gavel's Philly-derived traces merged (15,264 jobs) on 192 GPUs (64 K80, 64 P100, 64 V100:
//! the traces hold jobs of up to 64 GPUs) under each policy, and prints per policy the wall
//! time of the whole replay, the decisions (jobs started) per second of deciding, and the
//! average JCT. Tandem runs through the engine component, as in `tandem simulate`. No
//! assertion is made on time; the numbers are for people. Name policies after `--` to run only
//! those (`cargo bench -p tandem-tests --bench simulate -- tandem-balanced`).

use std::path::Path;

use tandem_host::{HostConfig, Runtime};
use tandem_sim::policy::{Built, Known, PolicyName};
use tandem_sim::{Cluster, Settings, Truth, convert, demo, simulate};
use tandem_tests::components;

/// The allocator `tandem simulate` runs with, so the replay measured is the one users get.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // Policy names given after `--` run only those (`-- tandem-balanced`); cargo's own flags
    // (`--bench`) are not names.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/gavel/traces/philly_vc_seed0");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&root)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "trace") {
            files.push((path.display().to_string(), std::fs::read_to_string(&path)?));
        }
    }
    files.sort();
    let trace = convert::gavel_traces(&files)?;
    let cluster = Cluster::parse(
        "nodes,gpus_per_node,gpu_model\n8,8,K80\n8,8,P100\n8,8,V100\n",
        "bench cluster",
    )?;
    let truth = Truth::new(&demo::catalogs()?)?;
    let runtime = Runtime::from_file(Path::new(components::ENGINE), HostConfig::default())?;
    let settings = Settings::default();
    let known = Known::of(&truth);
    println!(
        "simulate: {} jobs (15 Gavel traces merged), {} GPUs, settings {:?}",
        trace.jobs.len(),
        cluster.gpus().len(),
        settings
    );
    println!(
        "{:<20} {:>10} {:>14} {:>12} {:>12} {:>8}",
        "policy", "wall s", "decisions/s", "decisions", "avg JCT h", "OOMs"
    );
    for name in [
        PolicyName::ExclusiveFifo,
        PolicyName::Random,
        PolicyName::SchedTuneMinJct,
        PolicyName::JrsRanking,
        PolicyName::TandemBalanced,
    ] {
        if !only.is_empty() && !only.iter().any(|o| o == name.as_str()) {
            continue;
        }
        let Built::Ready(mut policy) = name.build(&known, &runtime, settings.seed)? else {
            continue;
        };
        let report = simulate(
            &truth,
            &cluster,
            &trace,
            &settings,
            policy.as_mut(),
            &mut |_| {},
        )?;
        println!(
            "{:<20} {:>10.2} {:>14.0} {:>12} {:>12.2} {:>8}",
            name.as_str(),
            report.wall_s,
            report.decisions_per_s,
            report.decisions,
            report.jct_s.mean / 3600.0,
            report.ooms
        );
    }
    println!("budget: under 5 s per replay on 2 cores");
    Ok(())
}
