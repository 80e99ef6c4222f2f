//! `cargo xtask fuzz`: the fuzz targets of `fuzz/`, built with libFuzzer's coverage
//! instrumentation and run for a fixed time each.
//!
//! cargo-fuzz needs a nightly compiler only for its sanitizers; coverage itself comes from
//! flags stable rustc accepts (`-Cpasses=sancov-module` and LLVM's sanitizer-coverage
//! options), so the targets are built here with those, for the host triple named explicitly:
//! with `--target`, `RUSTFLAGS` reach the targets' code but not build scripts, which would not
//! link against the instrumentation. The build has its own target directory, so instrumented
//! artefacts never replace the workspace's.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::process::{display, fresh_cargo, run};
use crate::toolchain::{HostRust, cache_dir};

/// One fuzz target: a binary of `tandem-fuzz` and the committed files it starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The binary's name, which `cargo xtask fuzz` takes.
    pub name: &'static str,
    /// What it feeds, for `--help` and the log.
    pub what: &'static str,
    /// Seed inputs, files relative to the workspace root.
    seeds: &'static [&'static str],
}

/// Every fuzz target, in the order `cargo xtask fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "catalog",
        what: "catalog JSON (tandem_catalog::Catalog::parse)",
        seeds: &[
            "data/catalogs/futurewei-p100.json",
            "data/catalogs/alnair-mps.json",
        ],
    },
    Target {
        name: "trace",
        what: "arrival-trace CSV (tandem_catalog::Trace::parse)",
        seeds: &["sim/data/demo-trace.csv"],
    },
    Target {
        name: "cluster",
        what: "cluster-shape CSV (tandem_catalog::Cluster::parse; absurd GPU counts refused)",
        seeds: &["sim/data/demo-cluster.csv"],
    },
    Target {
        name: "onnx",
        what: "ONNX models (tandem_declare::summarize)",
        seeds: &[
            "data/utilization/onnx/dqn_cartpole.onnx",
            "data/utilization/onnx/dcgan.onnx",
        ],
    },
    Target {
        name: "summary",
        what: "model-summary JSON (tandem_declare::read_summary_json)",
        seeds: &["fuzz/seeds/summary/dcgan-b64.json"],
    },
    Target {
        name: "snapshot",
        what: "engine snapshots (tandem_engine::Recommender::load, then save and load again)",
        seeds: &[
            "fuzz/seeds/snapshot/empty.json",
            "fuzz/seeds/snapshot/bootstrapped.json",
        ],
    },
    Target {
        name: "contract",
        what: "the contract's JSON: jobs, profiles, outcomes, cluster changes, policies",
        seeds: &["examples/queue.json", "examples/heterogeneous.json"],
    },
];

impl Target {
    /// The target called `name`, or an error listing them.
    pub fn named(name: &str) -> Result<Target> {
        TARGETS
            .iter()
            .copied()
            .find(|target| target.name == name)
            .with_context(|| {
                let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                format!(
                    "no fuzz target `{name}`; the targets are {}",
                    names.join(", ")
                )
            })
    }
}

/// Coverage instrumentation as cargo-fuzz sets it, minus the sanitizers (nightly only).
const COVERAGE_FLAGS: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    --cfg fuzzing -Cdebug-assertions";

/// Builds the targets of the workspace at `root` and runs each for `seconds`; fails at the
/// first crash, naming the input that caused it and the command that replays it.
pub fn fuzz(root: &Path, targets: &[Target], seconds: u64) -> Result<()> {
    let triple = HostRust::detect()?.triple;
    let home = cache_dir("TANDEM_FUZZ_DIR", "fuzz");
    let target_dir = home.join("target");
    let mut cargo = fresh_cargo();
    cargo
        .current_dir(root)
        .args(["build", "--release", "-p", "tandem-fuzz", "--target"])
        .arg(&triple)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("RUSTFLAGS", COVERAGE_FLAGS);
    eprintln!("==> RUSTFLAGS=<coverage> {}", display(&cargo));
    run(&mut cargo).context("building the fuzz targets failed")?;
    let bin_dir = target_dir.join(&triple).join("release");
    for target in targets {
        let corpus = home.join("corpus").join(target.name);
        let artifacts = home.join("artifacts").join(target.name);
        fs::create_dir_all(&corpus)
            .and_then(|()| fs::create_dir_all(&artifacts))
            .with_context(|| {
                format!(
                    "cannot create {} and {}",
                    corpus.display(),
                    artifacts.display()
                )
            })?;
        seed(root, target, &corpus)?;
        let binary = bin_dir.join(target.name);
        let mut command = Command::new(&binary);
        command
            .arg(&corpus)
            .arg(format!("-max_total_time={seconds}"))
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            // Inputs past 1 MiB only slow the search; the parsers' own bounds are tested
            // on their own.
            .arg("-max_len=1048576")
            .arg("-rss_limit_mb=2048")
            .arg("-print_final_stats=1");
        eprintln!(
            "==> fuzz `{}` ({}) for {seconds} s",
            target.name, target.what
        );
        if let Err(error) = run(&mut command) {
            let crashes = newest_artifacts(&artifacts);
            bail!(
                "{error:#}\nfuzz target `{}` failed; inputs saved in {}: {}\nreplay one with: {} <input>",
                target.name,
                artifacts.display(),
                crashes.join(", "),
                binary.display()
            );
        }
    }
    eprintln!("==> fuzzing found nothing");
    Ok(())
}

/// Copies the target's seeds into its corpus (a corpus libFuzzer also writes to, kept between
/// runs so each run starts where the last left off).
fn seed(root: &Path, target: &Target, corpus: &Path) -> Result<()> {
    for seed in target.seeds {
        let from = root.join(seed);
        let name = format!("seed-{}", seed.replace('/', "_"));
        fs::copy(&from, corpus.join(name)).with_context(|| {
            format!(
                "cannot copy seed {} into {}",
                from.display(),
                corpus.display()
            )
        })?;
    }
    Ok(())
}

/// The names of the files in `dir`, newest first.
fn newest_artifacts(dir: &Path) -> Vec<String> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    files
        .into_iter()
        .map(|(_, path)| path.display().to_string())
        .collect()
}
