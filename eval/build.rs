//! Builds the engine component for the tests, which compare the engine's predictions made
//! natively (as `eval memory` and `eval utilization` make them) with the component's. The
//! library itself takes its engine from the caller (a `tandem_host::Runtime`).

fn main() -> anyhow::Result<()> {
    tandem_xtask::BuildScriptGuests::from_env()?.embed_engine()?;
    Ok(())
}
