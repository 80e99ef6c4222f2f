//! Hand-written model summaries, as JSON.

use tandem_api::ModelSummary;

use crate::{DeclareError, Result};

/// Reads a hand-written [`ModelSummary`] from JSON: one object with exactly the summary's
/// `snake_case` fields, every one required.
///
/// Sizes and `gflops` must be finite and non-negative, the counts non-negative integers and
/// `batch_size` at least 1; an unknown field is an error (a typo must not silently leave a
/// field out). Every error names the field.
///
/// ```
/// let summary = tandem_declare::read_summary_json(
///     r#"{"params_mib": 97.5, "activations_mib": 2300, "input_mib": 18.4,
///         "batch_size": 32, "gflops": 131, "conv_layers": 53, "linear_layers": 1,
///         "activation_layers": 49, "other_layers": 71}"#,
/// )?;
/// assert_eq!(summary.batch_size, 32);
/// # Ok::<(), tandem_declare::DeclareError>(())
/// ```
pub fn read_summary_json(text: &str) -> Result<ModelSummary> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let summary: ModelSummary =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|e| DeclareError::Json {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
    deserializer.end().map_err(|e| DeclareError::Json {
        field: ".".to_owned(),
        message: e.to_string(),
    })?;
    check_summary(&summary)?;
    Ok(summary)
}

/// Checks a model summary however it was read: the range rules JSON cannot express (a number
/// too large for `f32` arrives as infinity), and a model with a size.
pub fn check_summary(summary: &ModelSummary) -> Result<()> {
    let amounts = [
        ("params_mib", summary.params_mib),
        ("activations_mib", summary.activations_mib),
        ("input_mib", summary.input_mib),
        ("gflops", summary.gflops),
    ];
    for (field, value) in amounts {
        if !value.is_finite() || value < 0.0 {
            return Err(DeclareError::InvalidSummary {
                field,
                problem: format!("must be finite and at least 0, got {value}"),
            });
        }
    }
    if summary.batch_size == 0 {
        return Err(DeclareError::InvalidSummary {
            field: "batch_size",
            problem: "must be at least 1, got 0".to_owned(),
        });
    }
    if summary.params_mib + summary.activations_mib + summary.input_mib <= 0.0 {
        return Err(DeclareError::InvalidSummary {
            field: "params_mib",
            problem: "params_mib, activations_mib and input_mib are all 0; a model has a size"
                .to_owned(),
        });
    }
    Ok(())
}
