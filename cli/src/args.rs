//! Arguments several commands share: where the engine comes from and its limits, the id
//! secret, the objective, and the output format.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use tandem_api::Objective;
use tandem_host::{HostConfig, Runtime};

/// The engine component this binary was built with.
use tandem_engine_embedded::COMPONENT as EMBEDDED_ENGINE;

/// Where the engine comes from and the limits it runs under.
#[derive(Debug, Args)]
pub(crate) struct EngineArgs {
    /// Engine component to use instead of the one built into this binary.
    #[arg(long, global = true, env = "TANDEM_ENGINE", value_name = "FILE")]
    engine: Option<PathBuf>,

    /// Wall-clock time one engine call may take before it is interrupted.
    #[arg(long, global = true, value_name = "MS", default_value_t = HostConfig::DEFAULT_CALL_DEADLINE.as_millis() as u64)]
    engine_deadline_ms: u64,

    /// Most memory the engine instance may use.
    #[arg(long, global = true, value_name = "MIB", default_value_t = (HostConfig::DEFAULT_MEMORY_CAP_BYTES >> 20) as u64)]
    engine_memory_mib: u64,
}

impl EngineArgs {
    /// Loads the engine component under the limits given.
    pub(crate) fn runtime(&self) -> anyhow::Result<Runtime> {
        let config = HostConfig {
            call_deadline: Duration::from_millis(self.engine_deadline_ms),
            memory_cap_bytes: usize::try_from(self.engine_memory_mib.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            ..HostConfig::default()
        };
        match &self.engine {
            Some(path) => Runtime::from_file(path, config)
                .with_context(|| format!("cannot load the engine component {}", path.display())),
            None => Runtime::from_bytes(EMBEDDED_ENGINE, config)
                .context("cannot load the engine component built into tandem"),
        }
    }
}

/// Where the id secret comes from.
#[derive(Debug, Args)]
pub(crate) struct SecretArgs {
    /// Id secret (hex) to use instead of the one next to the knowledge base.
    #[arg(long, value_name = "FILE", env = "TANDEM_SECRET_FILE")]
    pub(crate) secret_file: Option<PathBuf>,
}

/// The objectives, as command-line values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ObjectiveArg {
    /// Maximize packing saving while keeping individual slowdown low.
    Balanced,
    /// Smallest individual slowdown (the user's view).
    MinSlowdown,
    /// The most GPU time saved by sharing, whatever it costs individual jobs (the provider's
    /// view).
    MaxPacking,
}

impl From<ObjectiveArg> for Objective {
    fn from(value: ObjectiveArg) -> Self {
        match value {
            ObjectiveArg::Balanced => Objective::Balanced,
            ObjectiveArg::MinSlowdown => Objective::MinSlowdown,
            ObjectiveArg::MaxPacking => Objective::MaxPacking,
        }
    }
}

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for a person.
    Table,
    /// JSON for scripts (field names are a stable contract).
    Json,
}
