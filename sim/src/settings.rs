//! The settings of a run, shared by the event loop (which obeys them) and the report (which
//! states them). A leaf: it imports no other module of the crate but the error type, so both
//! sides can depend on it without depending on each other.

use serde::Serialize;

use crate::error::{Error, Result};

/// Settings of a run (the same for every policy compared).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// Length of the solo profiling window of a job type's first run, s (0: types count as
    /// profiled on arrival).
    pub profile_window_s: f64,
    /// Time from the start of a group that cannot run to the OOM of the job that joined it, s.
    pub oom_after_s: f64,
    /// How many queued jobs, from the head, a policy sees at each decision.
    pub window: usize,
    /// Share of the catalogs' measured pairs every policy is told before the run, as the
    /// history a cluster would have (0..=1).
    pub history_share: f64,
    /// Shortest time two jobs must share before their co-location is reported as an outcome, s.
    pub min_outcome_s: f64,
    /// Seed of every random draw (history split, random policies, the engine).
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            profile_window_s: 300.0,
            oom_after_s: 60.0,
            window: 32,
            history_share: 0.5,
            min_outcome_s: 60.0,
            seed: 1,
        }
    }
}

impl Settings {
    /// Checks the settings; errors name the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, problem: String| Error::Input {
            origin: format!("setting {name}"),
            problem,
        };
        for (name, value) in [
            ("profile-window-s", self.profile_window_s),
            ("oom-after-s", self.oom_after_s),
            ("min-outcome-s", self.min_outcome_s),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(bad(name, format!("must be a time ≥ 0, got {value}")));
            }
        }
        if !(0.0..=1.0).contains(&self.history_share) {
            return Err(bad(
                "history-share",
                format!("must be within 0..=1, got {}", self.history_share),
            ));
        }
        if self.window == 0 {
            return Err(bad("window", "must be at least 1".into()));
        }
        Ok(())
    }
}
