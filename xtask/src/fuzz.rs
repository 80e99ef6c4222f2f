//! `cargo xtask fuzz`: the fuzz targets of `fuzz/`, built with libFuzzer's coverage
//! instrumentation and run for a fixed time each.
//!
//! cargo-fuzz needs a nightly compiler only for its sanitizers; coverage itself comes from
//! flags stable rustc accepts (`-Cpasses=sancov-module` and LLVM's sanitizer-coverage
//! options), so the targets are built here with those. Only the workspace's own crates are
//! instrumented, through a `RUSTC_WORKSPACE_WRAPPER` (a shell script in the fuzz directory): the parsers are
//! ours, and instrumenting wasmtime, cranelift and kube as well (which the adapters and the CLI
//! link) would make the build far slower for coverage of code no target aims at. Generic code
//! of dependencies (serde's and serde_json's deserializers) is compiled, and so instrumented,
//! in the crates that use it. The host triple is named explicitly: with `--target`, cargo tells
//! the target's units (which the wrapper instruments) from build scripts (which it does not:
//! they would not link against libFuzzer). The build has its own target directory, so
//! instrumented artefacts never replace the workspace's.

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
    Target {
        name: "extender",
        what: "the schedulers' verb bodies: kube-scheduler's ExtenderArgs and BindingArgs, \
               vc-scheduler's extender requests, and the pods they carry",
        seeds: &[
            "fuzz/seeds/extender/filter-node-names.json",
            "fuzz/seeds/extender/prioritize-nodes.json",
            "fuzz/seeds/extender/bind.json",
            "fuzz/seeds/extender/volcano-predicate.json",
        ],
    },
    Target {
        name: "intake",
        what: "the adapters' intake bodies: profiles, outcomes, predict, estimate",
        seeds: &[
            "fuzz/seeds/intake/profiles.json",
            "fuzz/seeds/intake/outcomes.json",
            "fuzz/seeds/intake/predict.json",
            "fuzz/seeds/intake/estimate.json",
        ],
    },
    Target {
        name: "slurm",
        what: "the Slurm adapter's key=value bodies (submit, start, finish)",
        seeds: &[
            "fuzz/seeds/slurm/submit.txt",
            "fuzz/seeds/slurm/start.txt",
            "fuzz/seeds/slurm/finish.txt",
        ],
    },
    Target {
        name: "queue",
        what: "the CLI's queue files (tandem_cli::QueueFile, ONNX files left unread)",
        seeds: &[
            "examples/queue.json",
            "examples/heterogeneous.json",
            "fuzz/seeds/queue/residents-declared-onnx.json",
        ],
    },
    Target {
        name: "kb",
        what: "the CLI's knowledge-base files (tandem_cli::KbContents, written back and read again)",
        seeds: &[
            "fuzz/seeds/kb/empty.json",
            "fuzz/seeds/kb/bootstrapped.json",
        ],
    },
    Target {
        name: "node",
        what: "what the node component reads: NRI frames, ttrpc calls and messages from the \
               runtime, the verdict on a container, Tandem's annotations",
        seeds: &[
            "fuzz/seeds/node/create-container.bin",
            "fuzz/seeds/node/annotations.txt",
        ],
    },
];

impl Target {
    /// Its seed inputs: files relative to the workspace root.
    pub fn seeds(&self) -> &'static [&'static str] {
        self.seeds
    }

    /// Where `cargo xtask fuzz` keeps the corpus it grew for this target (which may not
    /// exist): `<fuzz dir>/corpus/<name>`, the fuzz dir being `$TANDEM_FUZZ_DIR`, else
    /// `$XDG_CACHE_HOME/tandem/fuzz`, else `~/.cache/tandem/fuzz`.
    pub fn corpus_dir(&self) -> PathBuf {
        cache_dir("TANDEM_FUZZ_DIR", "fuzz")
            .join("corpus")
            .join(self.name)
    }

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

/// Coverage instrumentation as cargo-fuzz sets it, minus the sanitizers (nightly only); the
/// wrapper adds it to the workspace's crates.
const COVERAGE_FLAGS: &[&str] = &[
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
];

/// Flags of every crate, dependencies included, as cargo-fuzz sets them: `cfg(fuzzing)`, and
/// debug assertions with overflow checks, so that an overflow in a parser or in the crates it
/// calls is a crash rather than a wrong answer.
const RUSTFLAGS: &str = "--cfg fuzzing -Cdebug-assertions";

/// The `RUSTC_WORKSPACE_WRAPPER` of the fuzz build: cargo runs it, for the workspace's crates
/// only, with rustc's path and arguments; it adds [`COVERAGE_FLAGS`] to the units built for
/// the target (those cargo passes `--target`), leaving build scripts as they are.
fn wrapper_script() -> String {
    format!(
        "#!/bin/sh
# Written by `cargo xtask fuzz` from xtask/src/fuzz.rs: change the flags there.
# Cargo runs it for the workspace's own crates: rustc's path, then rustc's arguments.
rustc=\"$1\"
shift
for arg in \"$@\"; do
    case \"$arg\" in
        --target|--target=*) exec \"$rustc\" \"$@\" {} ;;
    esac
done
exec \"$rustc\" \"$@\"
",
        COVERAGE_FLAGS.join(" ")
    )
}

/// Writes [`wrapper_script`] into `home`, executable, and returns its path. Cargo fingerprints
/// `RUSTFLAGS` but not what a wrapper adds, so when the script changed, the instrumented build
/// in `target_dir` is removed: otherwise crates built with the old flags would be kept.
fn install_wrapper(home: &Path, target_dir: &Path) -> Result<PathBuf> {
    let path = home.join("rustc-wrapper.sh");
    let script = wrapper_script();
    if fs::read_to_string(&path).ok().as_deref() == Some(script.as_str()) {
        return Ok(path);
    }
    if target_dir.exists() {
        fs::remove_dir_all(target_dir).with_context(|| {
            format!(
                "cannot remove {}, built with other coverage flags",
                target_dir.display()
            )
        })?;
    }
    fs::create_dir_all(home).with_context(|| format!("cannot create {}", home.display()))?;
    fs::write(&path, &script).with_context(|| format!("cannot write {}", path.display()))?;
    make_executable(&path)?;
    Ok(path)
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(path: &Path) -> Result<()> {
    bail!(
        "cannot run the shell script {} as rustc's wrapper: fuzzing needs a Unix host",
        path.display()
    )
}

/// Builds the targets of the workspace at `root` and runs each for `seconds`; fails at the
/// first crash, naming the input that caused it and the command that replays it.
pub fn fuzz(root: &Path, targets: &[Target], seconds: u64) -> Result<()> {
    let triple = HostRust::detect()?.triple;
    let home = cache_dir("TANDEM_FUZZ_DIR", "fuzz");
    let target_dir = home.join("target");
    let wrapper = install_wrapper(&home, &target_dir)?;
    let mut cargo = fresh_cargo();
    cargo
        .current_dir(root)
        .args([
            "build",
            "--release",
            "-p",
            "tandem-fuzz",
            "--features",
            "libfuzzer",
        ])
        .arg("--target")
        .arg(&triple)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("RUSTFLAGS", RUSTFLAGS)
        .env("RUSTC_WORKSPACE_WRAPPER", &wrapper)
        // The release profile's thin LTO would optimize each of the twelve binaries across
        // every crate it links (wasmtime and kube among them): minutes per binary, for no
        // coverage the fuzzer needs.
        .env("CARGO_PROFILE_RELEASE_LTO", "false");
    eprintln!(
        "==> RUSTFLAGS='{RUSTFLAGS}' RUSTC_WORKSPACE_WRAPPER={} CARGO_PROFILE_RELEASE_LTO=false {}",
        wrapper.display(),
        display(&cargo)
    );
    run(&mut cargo).context("building the fuzz targets failed")?;
    let bin_dir = target_dir.join(&triple).join("release");
    for target in targets {
        let corpus = target.corpus_dir();
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Runs the wrapper with `echo` as rustc: what it prints is the command line rustc gets.
    fn wrapped(home: &Path, args: &[&str]) -> Result<String> {
        let wrapper = install_wrapper(home, &home.join("target"))?;
        let output = Command::new(wrapper).arg("echo").args(args).output()?;
        Ok(String::from_utf8(output.stdout)?)
    }

    #[test]
    fn the_wrapper_instruments_target_units_only() -> Result<()> {
        let home = tempfile::tempdir()?;
        let target_unit = wrapped(home.path(), &["--crate-name", "a", "--target", "x86_64"])?;
        assert!(
            target_unit.starts_with("--crate-name a --target x86_64 -Cpasses=sancov-module "),
            "{target_unit}"
        );
        let build_script = wrapped(home.path(), &["--crate-name", "build_script_build"])?;
        assert_eq!(build_script, "--crate-name build_script_build\n");
        Ok(())
    }

    #[test]
    fn a_changed_wrapper_removes_the_build_made_with_the_old_one() -> Result<()> {
        let home = tempfile::tempdir()?;
        let target = home.path().join("target");
        fs::create_dir_all(&target)?;
        fs::write(
            home.path().join("rustc-wrapper.sh"),
            "#!/bin/sh\n# older flags\n",
        )?;
        install_wrapper(home.path(), &target)?;
        assert!(!target.exists());
        fs::create_dir_all(&target)?;
        install_wrapper(home.path(), &target)?;
        assert!(target.exists(), "an unchanged wrapper keeps the build");
        Ok(())
    }
}
