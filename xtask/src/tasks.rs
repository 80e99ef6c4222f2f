//! The tasks of `cargo xtask`: each one a function the binary calls after parsing arguments.
//!
//! Every task runs its child cargo from the workspace root, with [`crate::fresh_cargo`]'s
//! environment plus the caller's `CARGO_TARGET_DIR`, if one was set.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::background::BackgroundBuild;
use crate::guest::{GuestBuild, build_component};
use crate::kube::{KUBE_BIN_DIR_VAR, KubeBinaries, ensure_kube_binaries};
use crate::kube_plugin::{PLUGIN_SCHEDULER_VAR, Profile, ensure_plugin_scheduler};
use crate::process::{display, fresh_cargo, run};
use crate::slurm::ensure_slurm_packages;
use crate::toolchain::{WasmToolchain, ensure_toolchain};
use crate::volcano::{VC_SCHEDULER_VAR, VolcanoBuild, ensure_vc_scheduler, volcano_source};

/// The engine guest, built by `cargo xtask component`.
pub const ENGINE_PACKAGE: &str = "tandem-engine-component";

/// The workspace the tasks run in.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// `$CARGO_TARGET_DIR` as the caller set it, passed on to child cargos.
    target_dir_override: Option<PathBuf>,
}

impl Workspace {
    /// The workspace at `root`, honouring the current `CARGO_TARGET_DIR` (a relative one is
    /// taken relative to the current directory, as cargo does).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let target_dir_override = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .map(|dir| std::path::absolute(&dir).unwrap_or(dir));
        Self {
            root: root.into(),
            target_dir_override,
        }
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cargo target directory: `$CARGO_TARGET_DIR`, else `<root>/target`.
    pub fn target_dir(&self) -> PathBuf {
        self.target_dir_override
            .clone()
            .unwrap_or_else(|| self.root.join("target"))
    }

    /// A fresh cargo running in the workspace root, with `args`.
    pub fn cargo<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cargo = fresh_cargo();
        cargo.current_dir(&self.root).args(args);
        if let Some(dir) = &self.target_dir_override {
            cargo.env("CARGO_TARGET_DIR", dir);
        }
        cargo
    }
}

/// `cargo xtask toolchain`: ensures the wasm32 toolchain and returns it.
pub fn toolchain() -> Result<WasmToolchain> {
    ensure_toolchain()
}

/// `cargo xtask component`: builds the engine component into `out_dir` (default
/// `<target>/components`) and returns its path. Guests share `<target>/wasm-guests` with the
/// build scripts.
pub fn component(workspace: &Workspace, out_dir: Option<PathBuf>) -> Result<PathBuf> {
    let target_dir = workspace.target_dir();
    let build = GuestBuild {
        package: ENGINE_PACKAGE.to_owned(),
        workspace_root: workspace.root().to_path_buf(),
        target_dir: target_dir.join("wasm-guests"),
        out_dir: out_dir.unwrap_or_else(|| target_dir.join("components")),
    };
    build_component(&build)
}

/// `cargo xtask kube-bins`: builds (if missing) the Kubernetes binaries of the end-to-end tests
/// and returns them.
pub fn kube_bins() -> Result<KubeBinaries> {
    ensure_kube_binaries()
}

/// What the node tier runs besides the control plane.
#[derive(Debug, Clone)]
pub struct NodeBins {
    /// The kubelet.
    pub kubelet: PathBuf,
    /// The directory with containerd, its runc shim and ctr.
    pub containerd_dir: PathBuf,
    /// The test and sandbox images, as OCI archives.
    pub images: [crate::oci::Archive; 2],
}

/// `cargo xtask node-bins`: installs the node tier's Debian packages, builds (if missing) the
/// kubelet and containerd, and writes the test images into `<node_dir()>/images`.
pub fn node_bins() -> Result<NodeBins> {
    crate::node::ensure_node_packages()?;
    let containerd_dir = crate::node::ensure_containerd()?;
    let kubelet = crate::kube::ensure_kubelet()?;
    let images = crate::node::write_test_images(&crate::node::node_dir().join("images"))?;
    Ok(NodeBins {
        kubelet,
        containerd_dir,
        images,
    })
}

/// `cargo xtask e2e-bins`: builds (if missing) every program of another project the
/// end-to-end tiers start: Kubernetes' control plane and kubelet, containerd (with the node's
/// Debian packages and test images) and vc-scheduler. `tandem-kube-scheduler` is not among
/// them: it links this workspace's library, which cargo builds.
pub fn e2e_bins(workspace: &Workspace) -> Result<()> {
    let kube = kube_bins()?;
    eprintln!(
        "kube-apiserver, kube-scheduler, etcd: {}",
        kube.dir().display()
    );
    let volcano = vc_scheduler(workspace)?;
    eprintln!("vc-scheduler: {}", volcano.scheduler.display());
    let node = node_bins()?;
    eprintln!(
        "kubelet: {}; containerd: {}",
        node.kubelet.display(),
        node.containerd_dir.display()
    );
    Ok(())
}

/// `cargo xtask vc-scheduler`: builds (if missing) Volcano's scheduler from the source
/// [`volcano_source`] finds (`$TANDEM_VOLCANO_SRC`, the vendor copy, or a clone) and returns it.
pub fn vc_scheduler(workspace: &Workspace) -> Result<VolcanoBuild> {
    ensure_vc_scheduler(&volcano_source(workspace.root())?)
}

/// The size of the file at `path`, in bytes.
pub fn file_size(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path)
        .with_context(|| format!("could not stat {}", path.display()))?
        .len())
}

/// One step of the gate: cargo arguments and extra environment.
struct Step {
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// The CI gate before the end-to-end tiers, in order. Clippy and the docs see every feature,
/// so the end-to-end suites are linted although `cargo test` leaves them out.
const GATE: &[Step] = &[
    Step {
        args: &["fmt", "--all", "--check"],
        env: &[],
    },
    Step {
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step {
        args: &["doc", "--workspace", "--no-deps", "--all-features"],
        env: &[("RUSTDOCFLAGS", "-Dwarnings")],
    },
    Step {
        args: &["test", "--workspace"],
        env: &[],
    },
];

/// One `cargo test` run of a tier: a package's end-to-end test target (behind its `e2e`
/// feature, so a plain `cargo test` never builds it) and the test-name filters that pick the
/// tier's scenarios. Every tier of a package builds the same test binary: the filters, not
/// features, tell the tiers apart, so nothing is compiled twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    package: &'static str,
    /// Only tests whose names contain this (one filter), if set.
    only: Option<&'static str>,
    /// Tests whose names contain these are skipped.
    skip: &'static [&'static str],
}

impl Run {
    fn args(&self) -> Vec<&'static str> {
        let mut args = vec![
            "test",
            "--package",
            self.package,
            "--features",
            "e2e",
            "--test",
            "e2e",
        ];
        if self.only.is_some() || !self.skip.is_empty() {
            args.push("--");
            args.extend(self.only);
            for skipped in self.skip {
                args.extend(["--skip", skipped]);
            }
        }
        args
    }
}

/// A tier of end-to-end tests: scenarios against real scheduler processes that `cargo test`
/// alone never builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    /// The name `cargo xtask e2e` takes.
    pub name: &'static str,
    /// What it starts, for `--help` and the log.
    pub what: &'static str,
    runs: &'static [Run],
}

/// The end-to-end tiers, in the order `cargo xtask test` runs them.
pub const TIERS: &[Tier] = &[
    Tier {
        name: "kube",
        what: "etcd, kube-apiserver and kube-scheduler with the Tandem extender",
        runs: &[Run {
            package: "tandem-kube-adapter",
            only: None,
            skip: &["plugin::", "node::"],
        }],
    },
    Tier {
        name: "kube-plugin",
        what: "etcd, kube-apiserver and tandem-kube-scheduler (the Tandem framework plugin)",
        runs: &[Run {
            package: "tandem-kube-adapter",
            only: Some("plugin::"),
            skip: &[],
        }],
    },
    Tier {
        name: "volcano",
        what: "etcd, kube-apiserver and vc-scheduler (Volcano) with the Tandem extender",
        runs: &[Run {
            package: "tandem-volcano-adapter",
            only: None,
            skip: &["node::"],
        }],
    },
    Tier {
        name: "node",
        what: "real nodes (containerd with NRI, runc, the kubelet; fake GPUs) with tandem-node, \
               pods placed through tandem-kube-scheduler, the extender and vc-scheduler",
        runs: &[
            Run {
                package: "tandem-kube-adapter",
                only: Some("node::"),
                skip: &[],
            },
            Run {
                package: "tandem-volcano-adapter",
                only: Some("node::"),
                skip: &[],
            },
        ],
    },
    Tier {
        name: "slurm",
        what: "munged, slurmctld and slurmd from Debian with Tandem's SPANK plugin and job_submit.lua",
        runs: &[Run {
            package: "tandem-slurm-adapter",
            only: None,
            skip: &[],
        }],
    },
];

impl Tier {
    /// The tier called `name`.
    pub fn named(name: &str) -> Result<Tier> {
        TIERS
            .iter()
            .find(|tier| tier.name == name)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = TIERS.iter().map(|tier| tier.name).collect();
                anyhow::anyhow!(
                    "no end-to-end tier named `{name}` (tiers: {})",
                    names.join(", ")
                )
            })
    }

    /// Whether the tier needs the Kubernetes control plane binaries.
    fn needs_kube(&self) -> bool {
        self.name != "slurm"
    }
}

/// `cargo xtask test`: ensures the toolchain, then runs the gate (format, import cycles,
/// clippy, docs, the unit and integration tests — every fuzz target's seeds and kept corpus
/// replayed among them, `fuzz/tests/replay.rs` — then every end-to-end tier, printing each
/// command and stopping at the first failure. Exploring with the instrumented fuzz targets is
/// `cargo xtask fuzz`'s, not the gate's: its build of every crate again would double the
/// gate's compile time.
///
/// The tiers' Go programs ([`e2e_bins`]) build in a child of this program (`cargo xtask
/// e2e-bins`, niced, its log in the target directory) while the cargo steps run: it must be
/// called from the xtask binary.
pub fn test(workspace: &Workspace) -> Result<()> {
    let toolchain = ensure_toolchain()?;
    eprintln!("==> wasm32 toolchain: {toolchain}");
    // The SPANK plugin's bindings are generated from Slurm's headers by every workspace build.
    ensure_slurm_packages()?;
    let background = BackgroundBuild::start(&workspace.target_dir().join("e2e-bins.log"))?;
    for (index, step) in GATE.iter().enumerate() {
        if index == 1 {
            eprintln!("==> import cycles between modules");
            cycles(workspace)?;
        }
        let mut cargo = workspace.cargo(step.args);
        let mut shown = String::new();
        for (name, value) in step.env {
            cargo.env(name, value);
            shown.push_str(&format!("{name}={value} "));
        }
        shown.push_str(&display_as_cargo(&cargo));
        eprintln!("==> {shown}");
        run(&mut cargo).with_context(|| format!("gate step `{shown}` failed"))?;
    }
    background.finish();
    e2e(workspace, TIERS)?;
    eprintln!("==> gate passed");
    Ok(())
}

/// `cargo xtask e2e`: runs the given end-to-end tiers. What a tier runs against is built (if
/// missing) first, as a step of its own: the first builds take minutes and should not look like
/// a hung test.
pub fn e2e(workspace: &Workspace, tiers: &[Tier]) -> Result<()> {
    for tier in tiers {
        eprintln!("==> end-to-end tier `{}`: {}", tier.name, tier.what);
        let mut env: Vec<(&str, PathBuf)> = Vec::new();
        if tier.needs_kube() {
            let binaries = ensure_kube_binaries()?;
            let dir = binaries.dir();
            eprintln!(
                "==> kube-apiserver, kube-scheduler, etcd: {}",
                dir.display()
            );
            env.push((KUBE_BIN_DIR_VAR, dir.to_path_buf()));
        }
        if matches!(tier.name, "kube-plugin" | "node") {
            let binary =
                ensure_plugin_scheduler(workspace.root(), &workspace.target_dir(), Profile::Dev)?;
            eprintln!("==> tandem-kube-scheduler: {}", binary.display());
            env.push((PLUGIN_SCHEDULER_VAR, binary));
        }
        if matches!(tier.name, "volcano" | "node") {
            let build = vc_scheduler(workspace)?;
            eprintln!("==> vc-scheduler: {}", build.scheduler.display());
            env.push((VC_SCHEDULER_VAR, build.scheduler));
        }
        if tier.name == "node" {
            let node = node_bins()?;
            eprintln!(
                "==> kubelet: {}; containerd: {}",
                node.kubelet.display(),
                node.containerd_dir.display()
            );
            // The node component the scenarios run on every node.
            run_shown(workspace.cargo(["build", "--package", "tandem-node"]))?;
            env.push((
                NODE_BIN_VAR,
                workspace.target_dir().join("debug").join("tandem-node"),
            ));
        }
        if tier.name == "slurm" {
            ensure_slurm_packages()?;
            // The plugin slurmd loads; the suite finds it beside the service binary.
            run_shown(workspace.cargo(["build", "--package", "tandem-slurm-spank"]))?;
        }
        for step in tier.runs {
            let mut cargo = workspace.cargo(step.args());
            let mut shown = String::new();
            for (name, value) in &env {
                cargo.env(name, value);
                shown.push_str(&format!("{name}={} ", value.display()));
            }
            shown.push_str(&display_as_cargo(&cargo));
            eprintln!("==> {shown}");
            run(&mut cargo).with_context(|| format!("end-to-end tier `{}` failed", tier.name))?;
        }
    }
    Ok(())
}

/// The variable the node tier's scenarios find `tandem-node` through.
pub const NODE_BIN_VAR: &str = "TANDEM_NODE_BIN";

/// `cargo xtask cycles`: checks every crate of the workspace for modules that import each
/// other in a circle; prints what it checked, and each cycle found.
pub fn cycles(workspace: &Workspace) -> Result<()> {
    let reports = crate::cycles::check_workspace(workspace.root())?;
    let mut found = 0;
    for report in &reports {
        for cycle in &report.cycles {
            eprintln!("{}: {cycle}", report.root.display());
            found += 1;
        }
    }
    let modules: usize = reports.iter().map(|report| report.modules).sum();
    anyhow::ensure!(
        found == 0,
        "{found} import cycle(s) between modules (listed above); imports between sibling \
         modules must point one way"
    );
    eprintln!(
        "no import cycles in {} crates ({modules} modules)",
        reports.len()
    );
    Ok(())
}

/// `cargo xtask demo`: ensures the toolchain, then replays the built-in demo trace in the
/// simulator under Tandem and every baseline, printing the comparison and writing
/// `tandem-report.html` (plots) in the repository root.
///
/// A dev build: it shares its artifacts with `cargo xtask test` and compiles in a fraction of
/// a release build's time, and the demo replays in seconds either way (speed is measured by
/// `cargo xtask bench`, in release).
pub fn demo(workspace: &Workspace) -> Result<()> {
    ensure_toolchain()?;
    run_shown(workspace.cargo([
        "run",
        "--package",
        "tandem-cli",
        "--",
        "simulate",
        "--report",
        "tandem-report.html",
    ]))
}

/// `cargo xtask bench`: runs the benchmarks of `tandem-tests` (engine calls, the simulator's
/// 15,000-job replay), then the extender load benchmark of `tandem-kube-adapter`, then its
/// throughput benchmark against a real kube-scheduler (the Kubernetes binaries are built first,
/// if missing, as for the tests).
pub fn bench(workspace: &Workspace) -> Result<()> {
    run_shown(workspace.cargo(["bench", "--package", "tandem-tests"]))?;
    run_shown(workspace.cargo([
        "bench",
        "--package",
        "tandem-kube-adapter",
        "--bench",
        "extender",
    ]))?;
    let binaries = ensure_kube_binaries()?;
    let mut scheduler = workspace.cargo([
        "bench",
        "--package",
        "tandem-kube-adapter",
        "--bench",
        "scheduler",
    ]);
    scheduler.env(KUBE_BIN_DIR_VAR, binaries.dir());
    run_shown(scheduler)
}

fn run_shown(mut cargo: Command) -> Result<()> {
    let shown = display_as_cargo(&cargo);
    eprintln!("==> {shown}");
    run(&mut cargo).with_context(|| format!("`{shown}` failed"))
}

/// `cargo <args>`: the full path of `$CARGO` only makes the line longer.
fn display_as_cargo(cargo: &Command) -> String {
    let mut shown = Command::new("cargo");
    shown.args(cargo.get_args());
    display(&shown)
}

/// The gate as shell-like lines, for tests.
#[cfg(test)]
fn gate_commands() -> Vec<String> {
    GATE.iter()
        .map(|step| {
            let env = step
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}"));
            let cargo = std::iter::once("cargo".to_owned());
            let args = step.args.iter().map(|arg| (*arg).to_owned());
            env.chain(cargo).chain(args).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_runs_format_then_clippy_then_docs_then_tests() {
        assert_eq!(
            gate_commands(),
            [
                "cargo fmt --all --check",
                "cargo clippy --workspace --all-targets --all-features -- -D warnings",
                "RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --all-features",
                "cargo test --workspace",
            ]
        );
    }

    #[test]
    fn tiers_share_one_test_binary_per_package_and_differ_by_filter() {
        let args = |tier: &str| -> Vec<String> {
            Tier::named(tier)
                .unwrap()
                .runs
                .iter()
                .map(|run| run.args().join(" "))
                .collect()
        };
        assert_eq!(
            args("kube"),
            [
                "test --package tandem-kube-adapter --features e2e --test e2e -- --skip plugin:: \
              --skip node::"
            ]
        );
        assert_eq!(
            args("kube-plugin"),
            ["test --package tandem-kube-adapter --features e2e --test e2e -- plugin::"]
        );
        assert_eq!(
            args("node"),
            [
                "test --package tandem-kube-adapter --features e2e --test e2e -- node::",
                "test --package tandem-volcano-adapter --features e2e --test e2e -- node::"
            ]
        );
        assert_eq!(
            args("slurm"),
            ["test --package tandem-slurm-adapter --features e2e --test e2e"]
        );
        let error = Tier::named("kubernetes").unwrap_err().to_string();
        assert!(
            error.contains("`kubernetes`") && error.contains("kube"),
            "{error}"
        );
    }

    #[test]
    fn child_cargos_run_in_the_root_without_the_outer_build_scripts_environment() {
        let workspace = Workspace {
            root: PathBuf::from("/ws"),
            target_dir_override: Some(PathBuf::from("/cache/target")),
        };
        let cargo = workspace.cargo(["bench"]);
        assert_eq!(cargo.get_current_dir(), Some(Path::new("/ws")));
        let target = cargo
            .get_envs()
            .find(|(name, _)| *name == "CARGO_TARGET_DIR")
            .and_then(|(_, value)| value);
        assert_eq!(target, Some(std::ffi::OsStr::new("/cache/target")));
        assert_eq!(workspace.target_dir(), Path::new("/cache/target"));
    }
}
