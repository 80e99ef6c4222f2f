//! Builds the engine component and embeds it in the adapter binary, so it carries the
//! engine it was built with and needs no file next to it.

fn main() -> anyhow::Result<()> {
    let guests = tandem_xtask::BuildScriptGuests::from_env()?;
    let component = guests.build("tandem-engine-component")?;
    println!(
        "cargo:rustc-env=TANDEM_ENGINE_COMPONENT={}",
        component.display()
    );
    Ok(())
}
