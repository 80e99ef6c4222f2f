//! Builds the components the tests load (the engine and the misbehaving guest) and generates
//! path constants for them, so a test names a component that exists or does not compile.

use std::fmt::Write as _;

fn main() -> anyhow::Result<()> {
    let guests = tandem_xtask::BuildScriptGuests::from_env()?;
    let mut constants = String::new();
    for (name, package) in [
        ("ENGINE", "tandem-engine-component"),
        ("MISBEHAVING", "tandem-test-misbehaving"),
    ] {
        let path = guests.build(package)?;
        writeln!(
            constants,
            "/// The `{package}` component.\npub const {name}: &str = {:?};",
            path.display().to_string()
        )?;
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("components.rs");
    std::fs::write(out, constants)?;
    Ok(())
}
