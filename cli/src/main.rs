//! `tandem`: see `tandem --help`.

use std::process::ExitCode;

use clap::Parser;

/// A simulator replay lowers every GPU record into the engine at each decision and frees it
/// after: glibc's malloc and free took about a fifth of its CPU, and the replay runs about a
/// tenth faster on mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tandem_cli::run(tandem_cli::Cli::parse())
}
