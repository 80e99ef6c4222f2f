//! Errors of other crates as the CLI prints them: each cause once, and bad input marked so
//! that it exits with code 2 (the exit codes are in the crate docs).

/// Bad input whose cause is another crate's error: it prints as that error and its chain of
/// sources, and counts as bad input.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct BadInput(Box<dyn std::error::Error + Send + Sync>);

impl BadInput {
    /// Marks `error` as bad input.
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(error))
    }
}

/// A simulator error as the CLI reports it: with its chain of causes, each once, and marked as
/// bad input when `input` says the error (unreadable or malformed inputs, rules broken) is the
/// user's to fix.
pub(crate) fn from_sim(
    error: tandem_sim::Error,
    input: impl Fn(&tandem_sim::Error) -> bool,
) -> anyhow::Error {
    match error {
        tandem_sim::Error::Catalog(error) => BadInput::new(error).into(),
        other if input(&other) => BadInput::new(other).into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_failure_names_its_cause_once() {
        let error = from_sim(
            tandem_sim::Error::Engine {
                policy: "tandem-balanced".into(),
                source: tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(
                    "no GPUs".into(),
                )),
            },
            |_| false,
        );
        assert_eq!(
            format!("{error:#}"),
            "policy tandem-balanced: the engine failed: invalid input: no GPUs"
        );
    }

    #[test]
    fn a_catalog_error_keeps_its_cause_and_is_bad_input() {
        let missing = std::path::Path::new("/nonexistent/catalog.json");
        let error = from_sim(
            tandem_catalog::Catalog::read(missing).unwrap_err().into(),
            |_| true,
        );
        let printed = format!("{error:#}");
        assert!(
            printed.starts_with("/nonexistent/catalog.json: cannot read the file: "),
            "{printed}"
        );
        assert_eq!(printed.matches("No such file").count(), 1, "{printed}");
        assert!(error.chain().any(|cause| cause.is::<BadInput>()));
    }
}
