//! `cargo xtask`: Tandem's build orchestration (see the `tandem_xtask` library).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tandem_xtask::tasks::{self, Workspace};
use tandem_xtask::{fuzz, images};

/// Build orchestration for Tandem: the wasm32 toolchain, the engine component, the Kubernetes
/// binaries of the end-to-end tests, the CI gate.
#[derive(Debug, Parser)]
#[command(bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Make sure a wasm32 toolchain is there and say which one and where.
    ///
    /// Without rustup's wasm32 target, Debian's rustc-web is bootstrapped into
    /// $TANDEM_TOOLCHAIN_DIR, else $XDG_CACHE_HOME/tandem/toolchain, else
    /// ~/.cache/tandem/toolchain.
    Toolchain,
    /// Build the engine component (tandem-engine-component) and print its path and size.
    Component {
        /// Directory to write the component into [default: the target directory's components/].
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Build kube-apiserver, kube-scheduler and etcd for the end-to-end tests and print their paths.
    ///
    /// Built from the Go module in xtask/kube into $TANDEM_KUBE_DIR, else
    /// $XDG_CACHE_HOME/tandem/kube, else ~/.cache/tandem/kube (one directory per version of the
    /// module); nothing is rebuilt when they are there. Needs Go 1.25 or newer.
    KubeBins,
    /// Build tandem-kube-scheduler (kube-scheduler with the Tandem framework plugin) and print
    /// its path.
    ///
    /// The static library of tandem-kube-capi (`cargo build --release`: the binary deployed and
    /// benchmarked; the end-to-end tiers build it in the tests' dev profile), then the Go module in
    /// kube-plugin/scheduler with cgo, into the same cache as kube-bins (one directory
    /// per version of the library and the module). The Go code is checked on the way: `gofmt
    /// -l` must list nothing, `go vet` and the plugin's unit tests (`go test`) must pass. Needs
    /// Go 1.25 or newer and a C compiler.
    KubeSchedulerPlugin,
    /// Build the pieces of a real node for the node end-to-end tier and print their paths: the
    /// kubelet (beside the kube-bins), containerd with its runc shim and ctr, and the test
    /// images (OCI archives of busybox).
    ///
    /// containerd v2.4.2 is built with `go install` into $TANDEM_NODE_DIR, else
    /// $XDG_CACHE_HOME/tandem/node, else ~/.cache/tandem/node; runc, the CNI plugins and
    /// busybox are installed from Debian's packages (apt-get, as root) when missing.
    NodeBins,
    /// Build helm (v3, from its Go module) for the chart's tier and print its path.
    ///
    /// `go install helm.sh/helm/v3/cmd/helm@VERSION` into the kube-bins cache
    /// ($TANDEM_KUBE_DIR, else ~/.cache/tandem/kube), directory helm-VERSION; nothing is
    /// rebuilt when it is there.
    Helm,
    /// Build Volcano's vc-scheduler for the volcano end-to-end tier and print its path.
    ///
    /// From $TANDEM_VOLCANO_SRC, else ../shared/vendor/volcano-v1.15.1 beside the repository,
    /// else a shallow clone of tag v1.15.1 of volcano-sh/volcano; built with
    /// `CGO_ENABLED=1 go build -trimpath -mod=readonly ./cmd/scheduler` into
    /// $TANDEM_VOLCANO_DIR, else ~/.cache/tandem/volcano (one directory per source).
    VcScheduler,
    /// Build (if missing) every program of another project the end-to-end tiers start, and
    /// print where: kube-bins, helm, vc-scheduler and node-bins in one.
    ///
    /// Not tandem-kube-scheduler, which links this workspace's library (kube-scheduler-plugin).
    E2eBins,
    /// Run the whole gate, stopping at the first failure: fmt, import cycles, the
    /// documentation's references (`cargo xtask docs`), what the dependencies may be
    /// (`cargo xtask deny`), clippy, docs,
    /// the unit and integration tests (`cargo test --workspace`, which replays every fuzz
    /// target's seeds and kept corpus), then every end-to-end tier (the framework plugin's Go
    /// code is gofmt'd, vetted and unit-tested where its scheduler is built).
    ///
    /// While the cargo steps run, e2e-bins runs beside them at a lower priority (its log:
    /// e2e-bins.log in the target directory), using the core cargo leaves idle; a tier waits
    /// for what it needs, and builds it itself if that build failed. Each tier finds its
    /// programs through variables (TANDEM_KUBE_BIN_DIR, ...).
    Test,
    /// Run end-to-end tiers alone: suites that start real scheduler processes.
    ///
    /// Tiers: kube (etcd, kube-apiserver and kube-scheduler with the Tandem extender; the
    /// binaries are built from Go on first use), kube-plugin (etcd, kube-apiserver and
    /// tandem-kube-scheduler, the framework plugin), helm (the chart: helm lint and template
    /// of every mode, a server-side dry run and RBAC reviews against an apiserver with RBAC,
    /// `helm install` running tandem-kube-scheduler as its pod; helm is built from its Go
    /// module on first use), slurm (munged, slurmctld and slurmd from
    /// Debian with the SPANK plugin and job_submit.lua), volcano (etcd, kube-apiserver and
    /// vc-scheduler with the Tandem extender), node (real nodes: containerd with NRI, runc and
    /// the kubelet with fake GPUs, tandem-node on each, pods placed by all three schedulers
    /// that really run; needs root); `cargo xtask test` runs them all, in this order. A plain
    /// `cargo test` runs none of them. Each tier is the test target of tests/e2e named as it.
    E2e {
        /// Tiers to run [default: all].
        #[arg(value_name = "TIER")]
        tiers: Vec<String>,
        /// Arguments for each tier's test harness, after `--`: a name filter, `--nocapture`
        /// (`cargo xtask e2e kube -- --nocapture knowledge::`).
        #[arg(last = true, value_name = "TEST_ARGS")]
        test_args: Vec<String>,
    },
    /// Check every crate for modules that import each other in a circle (directly or through
    /// other modules, at any level of the module tree); fails if one does.
    Cycles,
    /// Check that every relative link and repository path in the README, the Markdown docs and
    /// the `--help` sources names a file or folder that exists; fails naming each that does
    /// not. No network: links to other sites are not followed.
    Docs,
    /// Check the dependencies against deny.toml: `cargo deny check licenses bans sources`,
    /// offline, after `cargo fetch`. Builds cargo-deny (a pinned release, from crates.io) into
    /// ~/.cache/tandem the first time.
    Deny,
    /// Fuzz the parsers (coverage-guided, libFuzzer) for a fixed time per target.
    ///
    /// Builds the `tandem-fuzz` targets with stable rustc's coverage instrumentation into
    /// $TANDEM_FUZZ_DIR, else ~/.cache/tandem/fuzz (its own target directory, the corpora kept
    /// between runs, crashing inputs under artifacts/TARGET), then runs each. Targets:
    /// catalog, trace, cluster, onnx, summary, snapshot, contract, extender, intake, slurm,
    /// queue, kb, node. Fails at the first crash, naming the input and the command that replays it.
    /// `cargo xtask test` replays each target's seeds and kept corpus through the ordinary
    /// test build instead (fuzz/tests/replay.rs).
    Fuzz {
        /// Targets to run [default: all].
        #[arg(value_name = "TARGET")]
        targets: Vec<String>,
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Replay the built-in demo trace in the simulator under Tandem and every baseline: a table
    /// of the results and tandem-report.html (plots).
    ///
    /// Built in the `demo` profile, which keeps the first build from empty caches short (no
    /// debug information, Cranelift unoptimized); the engine component is the one the other
    /// builds embed.
    Demo,
    /// Build a container image of every program Tandem runs in a cluster, without a registry.
    ///
    /// Images: tandem-kube-adapter (the extender), tandem-kube-scheduler (the framework
    /// plugin), tandem-volcano-adapter, tandem-profiler, tandem-node. Each holds its release
    /// binary, the shared libraries it links and the loader, runs as user 65532, and is
    /// labelled with its `--version`; each is checked by running `--version` inside it (as
    /// root, under chroot). Written as OCI archives (`ctr images import`, `podman load`,
    /// `skopeo copy oci-archive:...`) named localhost/IMAGE:VERSION (Tandem's version), into --out, else
    /// $TANDEM_IMAGES_DIR, else $XDG_CACHE_HOME/tandem/images, else ~/.cache/tandem/images.
    Images {
        /// Images to build [default: all].
        images: Vec<String>,
        /// Directory to write the archives into.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run the benchmarks: engine calls (component vs native), the simulator, the extender
    /// under load, and kube-scheduler's throughput with and without the extender.
    Bench,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The chain, not anyhow's Debug: with RUST_BACKTRACE set that would bury the
            // message under a backtrace of xtask itself.
            eprintln!("error: {error}");
            for cause in error.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let workspace = Workspace::new(workspace_root());
    match cli.task {
        Task::Toolchain => {
            let toolchain = tasks::toolchain()?;
            println!("{toolchain}");
        }
        Task::Component { out } => {
            let component = tasks::component(&workspace, out)?;
            let size = tasks::file_size(&component)?;
            println!("{} ({size} bytes)", component.display());
        }
        Task::KubeBins => {
            let binaries = tasks::kube_bins()?;
            for binary in [&binaries.apiserver, &binaries.scheduler, &binaries.etcd] {
                println!("{}", binary.display());
            }
        }
        Task::KubeSchedulerPlugin => {
            let binary = tandem_xtask::kube_plugin::ensure_plugin_scheduler(
                workspace.root(),
                &workspace.target_dir(),
                tandem_xtask::kube_plugin::Profile::Release,
            )?;
            println!("{}", binary.display());
        }
        Task::NodeBins => {
            let node = tasks::node_bins()?;
            println!("{}", node.kubelet.display());
            println!("{}", node.containerd_dir.display());
            for image in &node.images {
                println!("{} ({} bytes)", image.path.display(), image.size);
            }
        }
        Task::Docs => tasks::docs(&workspace)?,
        Task::Deny => tandem_xtask::deny::check(workspace.root())?,
        Task::Helm => println!("{}", tandem_xtask::helm::ensure_helm()?.display()),
        Task::VcScheduler => {
            let build = tasks::vc_scheduler(&workspace)?;
            println!("{}", build.scheduler.display());
        }
        Task::E2eBins => tasks::e2e_bins(&workspace)?,
        Task::Test => tasks::test(&workspace)?,
        Task::E2e { tiers, test_args } => {
            let tiers = named_or_all(&tiers, tasks::TIERS, tasks::Tier::named)?;
            tasks::e2e(&workspace, &tiers, &test_args)?;
        }
        Task::Cycles => tasks::cycles(&workspace)?,
        Task::Fuzz { targets, seconds } => {
            let targets = named_or_all(&targets, fuzz::TARGETS, fuzz::Target::named)?;
            fuzz::fuzz(workspace.root(), &targets, seconds)?;
        }
        Task::Images { images, out } => {
            let programs = named_or_all(&images, &images::PROGRAMS, images::Program::named)?;
            let out = out.unwrap_or_else(images::images_dir);
            for built in images::build_images(&workspace, &programs, &out)? {
                println!(
                    "{} {} ({:.1} MiB; {})",
                    built.name,
                    built.archive.path.display(),
                    built.archive.size as f64 / (1024.0 * 1024.0),
                    built.checked
                );
            }
        }
        Task::Demo => tasks::demo(&workspace)?,
        Task::Bench => tasks::bench(&workspace)?,
    }
    Ok(())
}

/// The items `names` name (each through `named`, which says what a wrong name should be), or
/// every one of `all` when no name is given.
fn named_or_all<T: Clone>(
    names: &[String],
    all: &[T],
    named: impl Fn(&str) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<T>> {
    if names.is_empty() {
        Ok(all.to_vec())
    } else {
        names.iter().map(|name| named(name)).collect()
    }
}

/// The workspace root: this crate lives at `<root>/xtask`. `cargo run` says where at run time;
/// the compile-time path is the fallback (a binary built from a copy of the tree at another
/// path can be fresh in a shared target directory and would name the other tree).
fn workspace_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.join("Cargo.toml").is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cargo_xtask_command_of_the_readme_parses() {
        let commands: Vec<_> = tandem_xtask::docs::shell_commands(include_str!("../../README.md"))
            .into_iter()
            .filter(|words| words.starts_with(&["cargo".to_owned(), "xtask".to_owned()]))
            .collect();
        assert!(commands.len() > 5, "{commands:?}");
        for words in commands {
            let parsed = Cli::try_parse_from(
                std::iter::once("cargo xtask".to_owned()).chain(words[2..].iter().cloned()),
            );
            assert!(parsed.is_ok(), "`{}`: {parsed:?}", words.join(" "));
        }
    }
}
