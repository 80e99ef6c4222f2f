//! The engine component this workspace builds, embedded: a program that depends on this crate
//! carries the engine it was built with, and loads it with
//! `tandem_host::Runtime::from_bytes(tandem_engine_embedded::COMPONENT, ..)`.
//!
//! One crate embeds it, so one build script builds it and one copy of its bytes is linked into
//! each binary, whichever crates of the binary use it.

/// The engine component's bytes (a WebAssembly component of world `tandem:engine/plugin`).
pub static COMPONENT: &[u8] = include_bytes!(env!("TANDEM_ENGINE_COMPONENT"));

/// Where the build left the component on disk, for tests that load it by path.
pub const PATH: &str = env!("TANDEM_ENGINE_COMPONENT");
