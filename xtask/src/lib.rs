//! Build orchestration for Tandem: everything between `cargo` and a finished engine component.
//!
//! Tandem's engine runs as a WebAssembly component built for `wasm32-unknown-unknown`. The
//! machines this project runs on have no wasm32 standard library in rustup and cannot download
//! one, so this crate knows two ways to build a guest (docs/DEVELOPING.md, "The wasm32 toolchain"):
//!
//! - [`WasmToolchain::Rustup`]: rustup's toolchain already has the wasm32 target; a plain
//!   `cargo rustc --target wasm32-unknown-unknown` builds the guest.
//! - [`WasmToolchain::Debian`]: Debian's `rustc-web` compiler and its standard-library
//!   sources, unpacked into a private cache ([`toolchain_dir`]), build `std` for wasm32 with
//!   `-Zbuild-std`, linked by rustup's `rust-lld`.
//!
//! [`ensure_toolchain`] picks one (bootstrapping the Debian one when needed, idempotently),
//! [`build_component`] builds one guest crate of the workspace and wraps the core module into a
//! component in-process with `wit-component`.
//!
//! The crate is used twice:
//!
//! - by the `xtask` binary (`cargo xtask toolchain|component|test|demo|bench`, see [`tasks`]);
//! - as a build-dependency of crates that embed or test guests. Their build scripts use
//!   [`BuildScriptGuests`], which derives a guest target directory from `OUT_DIR`, runs a
//!   nested cargo with a scrubbed environment ([`fresh_cargo`]) and prints the
//!   `cargo:rerun-if-*` lines:
//!
//! ```no_run
//! // build.rs
//! fn main() -> anyhow::Result<()> {
//!     let guests = tandem_xtask::BuildScriptGuests::from_env()?;
//!     let engine = guests.build("tandem-engine-component")?;
//!     println!("cargo:rustc-env=TANDEM_ENGINE_COMPONENT={}", engine.display());
//!     Ok(())
//! }
//! ```
//!
//! It also builds the real Kubernetes binaries the end-to-end tests of `tandem-kube-adapter`
//! run against: [`kube::ensure_kube_binaries`] builds `kube-apiserver`, `kube-scheduler` and
//! `etcd` from the Go module in `xtask/kube` (pinned by its committed `go.sum`) into a cache
//! outside the tree ([`kube::kube_dir`]), once per version of the module
//! (`cargo xtask kube-bins`; `cargo xtask test` does it before running the tests), and
//! [`kube_plugin::ensure_plugin_scheduler`] builds `tandem-kube-scheduler`, kube-scheduler
//! with the Tandem framework plugin linked in through cgo (`cargo xtask kube-scheduler-plugin`),
//! and [`volcano::ensure_vc_scheduler`] builds Volcano's `vc-scheduler` from a directory of its
//! source (`cargo xtask vc-scheduler`).

mod background;
mod build_script;
pub mod cycles;
pub mod deny;
pub mod docs;
pub mod fuzz;
mod guest;
pub mod helm;
pub mod images;
pub mod kube;
pub mod kube_plugin;
pub mod node;
pub mod oci;
mod process;
pub mod slurm;
pub mod tasks;
mod toolchain;
pub mod volcano;

pub use build_script::{BuildScriptGuests, guest_target_dir};
pub use guest::{GuestBuild, build_component, build_core_module, componentize};
pub use process::{cargo_program, fresh_cargo};
pub use toolchain::{
    DEBIAN_PACKAGES, DEBIAN_RUST_RELEASE, HostRust, WASM_TARGET, WasmToolchain, ensure_toolchain,
    toolchain_dir,
};
