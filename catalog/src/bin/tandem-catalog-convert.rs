//! Regenerates `data/catalogs/*.json` from the vendored sources in `data/`.
//!
//! ```sh
//! cargo run -p tandem-catalog --bin tandem-catalog-convert            # from the repository root
//! cargo run -p tandem-catalog --bin tandem-catalog-convert -- --data data --out data/catalogs
//! ```

use std::error::Error as _;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
Regenerates the measured catalogs from the vendored sources.

Usage: tandem-catalog-convert [--data DIR] [--out DIR]

Options:
  --data DIR  the vendored sources (default: data)
  --out DIR   where the catalogs go (default: <data>/catalogs)
  -h, --help  this text

Exit codes: 0 written, 1 a source could not be read or converted, 2 bad arguments.";

fn main() -> ExitCode {
    let mut data = PathBuf::from("data");
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let target = match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--data" => &mut data,
            "--out" => out.insert(PathBuf::new()),
            other => {
                eprintln!("error: unexpected argument `{other}`\n\n{USAGE}");
                return ExitCode::from(2);
            }
        };
        match args.next() {
            Some(value) => *target = PathBuf::from(value),
            None => {
                eprintln!("error: `{arg}` needs a folder\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let out = out.unwrap_or_else(|| data.join("catalogs"));

    match tandem_catalog::convert::write_all(&data, &out) {
        Ok(written) => {
            for path in written {
                println!("wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprint!("error: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                eprint!(": {cause}");
                source = cause.source();
            }
            eprintln!();
            ExitCode::FAILURE
        }
    }
}
