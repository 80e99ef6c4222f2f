//! Builds the engine component and embeds it in the adapter binary, so it carries the
//! engine it was built with and needs no file next to it.

fn main() -> anyhow::Result<()> {
    tandem_xtask::BuildScriptGuests::from_env()?.embed_engine()?;
    Ok(())
}
