//! Builds the engine component and embeds it (`EMBEDDED_ENGINE`), so every adapter binary
//! carries the engine it was built with and needs no file next to it.

fn main() -> anyhow::Result<()> {
    tandem_xtask::BuildScriptGuests::from_env()?.embed_engine()?;
    Ok(())
}
