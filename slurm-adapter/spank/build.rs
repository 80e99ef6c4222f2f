//! Derives the Slurm version the plugin is built for from the installed headers: slurmd and
//! the clients refuse a SPANK plugin whose `plugin_version` is not their own
//! `SLURM_VERSION_NUMBER`, so it must come from the same release as the Slurm it is loaded by.

use std::path::PathBuf;

fn main() {
    let include = std::env::var_os("SLURM_INCLUDE_DIR")
        .map_or_else(|| PathBuf::from("/usr/include"), PathBuf::from);
    let header = include.join("slurm/slurm_version.h");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(&header).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}): install Slurm's headers (Debian: libslurm-dev) or set SLURM_INCLUDE_DIR",
            header.display()
        )
    });
    let number = text
        .lines()
        .find_map(|line| {
            let rest = line.trim().strip_prefix("#define SLURM_VERSION_NUMBER")?;
            let hex = rest.trim().strip_prefix("0x")?;
            u32::from_str_radix(hex.trim(), 16).ok()
        })
        .unwrap_or_else(|| panic!("{} defines no SLURM_VERSION_NUMBER 0x...", header.display()));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(
        out.join("slurm_version.rs"),
        format!(
            "/// `SLURM_VERSION_NUMBER` of the headers this plugin was built with.\npub const SLURM_VERSION_NUMBER: u32 = {number:#x};\n"
        ),
    )
    .expect("cannot write slurm_version.rs");
}
