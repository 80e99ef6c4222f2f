//! `tandem`: see `tandem --help`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tandem_cli::run(tandem_cli::Cli::parse())
}
