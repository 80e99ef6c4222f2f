//! How an engine call fails: not answered ([`CallError`]), or answered with a failure of the
//! engine or the host ([`EngineFailure`]); [`EngineError`] is either.

use std::time::Duration;

/// Why an engine call was not answered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The queue in front of the engine is full.
    #[error("the engine is overloaded ({0} calls queued); try again")]
    Overloaded(usize),
    /// The answer did not come within the caller's time limit.
    #[error("the engine did not answer within {0:?}")]
    TimedOut(Duration),
    /// The engine thread is gone (the process is stopping).
    #[error("the engine thread stopped")]
    Stopped,
}

/// An engine call failed inside the engine or the host. The message names the call; what the
/// host said is the source, for [`tandem_telemetry::report`] to add.
#[derive(Debug, thiserror::Error)]
#[error("engine {call} failed")]
pub struct EngineFailure {
    /// The call.
    pub call: &'static str,
    /// What the host said.
    #[source]
    pub source: tandem_host::Error,
}

impl EngineFailure {
    /// Whether the engine refused the input (a client's mistake), rather than failing.
    pub fn is_refusal(&self) -> bool {
        matches!(self.source, tandem_host::Error::Engine(_))
    }
}

/// Why an engine call gave no answer to use: it was not answered, or it was answered with a
/// failure. Callers that treat the two alike use `?` or its message; those that do not (fail
/// open on one, refuse on the other) match on it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The call was not answered: the engine was overloaded, too slow, or stopping.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The call was answered with a failure of the engine or the host.
    #[error(transparent)]
    Failed(#[from] EngineFailure),
}

impl EngineError {
    /// Whether the engine refused the input (a client's mistake), rather than failing or not
    /// answering.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Failed(failure) if failure.is_refusal())
    }
}

/// The error of engine call `call`, for `map_err`.
pub fn failed(call: &'static str) -> impl FnOnce(tandem_host::Error) -> EngineFailure {
    move |source| EngineFailure { call, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_error_says_what_its_cause_says_and_only_the_engines_refusal_is_one() {
        let refused = EngineError::from(EngineFailure {
            call: "predict",
            source: tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(
                "no jobs".into(),
            )),
        });
        let broken = EngineError::from(failed("load")(tandem_host::Error::NotWasm));
        let unanswered = EngineError::from(CallError::Overloaded(3));
        assert!(refused.is_refusal());
        assert!(!broken.is_refusal());
        assert!(!unanswered.is_refusal());
        // Callers show the message as it is: an engine error adds nothing to its cause's.
        assert_eq!(unanswered.to_string(), CallError::Overloaded(3).to_string());
        let EngineError::Failed(failure) = &broken else {
            panic!("{broken:?}");
        };
        assert_eq!(broken.to_string(), failure.to_string());
    }
}
