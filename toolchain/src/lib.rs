//! The wasm32 toolchain and guest component builds: everything between `cargo` and a finished
//! engine component.
//!
//! Tandem's engine runs as a WebAssembly component built for `wasm32-unknown-unknown`. The
//! machines this project runs on may have no wasm32 standard library in rustup and cannot
//! download one, so this crate knows two ways to build a guest (docs/DEVELOPING.md, "The wasm32
//! toolchain"):
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
//! Two kinds of caller use it: `xtask` (`cargo xtask toolchain|component`), and build scripts
//! that build guests — `tandem-engine-embedded`'s, which embeds the engine every binary carries,
//! and the tests' for their misbehaving guest. A build script uses [`BuildScriptGuests`], which
//! derives a guest target directory from `OUT_DIR`, runs a nested cargo with a scrubbed
//! environment ([`process::fresh_cargo`]) and prints the `cargo:rerun-if-*` lines:
//!
//! ```no_run
//! // build.rs
//! fn main() -> anyhow::Result<()> {
//!     let guests = tandem_toolchain::BuildScriptGuests::from_env()?;
//!     let engine = guests.build("tandem-engine-component")?;
//!     println!("cargo:rustc-env=TANDEM_ENGINE_COMPONENT={}", engine.display());
//!     Ok(())
//! }
//! ```

mod build_script;
mod guest;
pub mod process;
pub mod toolchain;

pub use build_script::{BuildScriptGuests, guest_target_dir};
pub use guest::{GuestBuild, build_component, build_core_module, componentize};
pub use toolchain::{
    DEBIAN_PACKAGES, DEBIAN_RUST_RELEASE, HostRust, WASM_TARGET, WasmToolchain, ensure_toolchain,
    toolchain_dir,
};
