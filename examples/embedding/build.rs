//! Builds the engine component and embeds it, as the CLI and the adapters do: the program
//! carries the engine it was built with.

fn main() -> anyhow::Result<()> {
    tandem_xtask::BuildScriptGuests::from_env()?.embed_engine()?;
    Ok(())
}
