//! Builds the misbehaving guest the host's tests load and generates a path constant for it, so
//! a test names a component that exists or does not compile. The engine comes from
//! `tandem-engine-embedded`, which builds it once for the whole workspace.

fn main() -> anyhow::Result<()> {
    let guests = tandem_toolchain::BuildScriptGuests::from_env()?;
    let path = guests.build("tandem-test-misbehaving")?;
    let constants = format!(
        "/// The `tandem-test-misbehaving` component.\npub const MISBEHAVING: &str = {:?};\n",
        path.display().to_string()
    );
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("components.rs");
    std::fs::write(out, constants)?;
    Ok(())
}
