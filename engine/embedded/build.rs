//! Builds the engine component (`tandem-engine-component`, for wasm32) and tells the crate where
//! it is: the one build script of the workspace that builds the engine.

fn main() -> anyhow::Result<()> {
    tandem_toolchain::BuildScriptGuests::from_env()?.embed_engine()?;
    Ok(())
}
