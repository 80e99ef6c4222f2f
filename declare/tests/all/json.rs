//! Hand-written JSON summaries.

use tandem_declare::onnx::build;
use tandem_declare::{read_summary_json, summarize};

const VALID: &str = r#"{
    "params_mib": 97.5, "activations_mib": 2300, "input_mib": 18.4, "batch_size": 32,
    "gflops": 131, "conv_layers": 53, "linear_layers": 1, "activation_layers": 49,
    "other_layers": 71
}"#;

fn message(text: &str) -> String {
    match read_summary_json(text) {
        Ok(summary) => panic!("expected an error, got {summary:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_complete_summary_is_read() {
    let summary = read_summary_json(VALID).unwrap();
    assert_eq!(summary.params_mib, 97.5);
    assert_eq!(summary.batch_size, 32);
    assert_eq!(summary.other_layers, 71);
}

#[test]
fn a_summary_of_an_onnx_file_round_trips_through_json() {
    let summary = summarize(&build::lenet(None), Some(8)).unwrap();
    let text = serde_json::to_string(&summary).unwrap();
    assert_eq!(read_summary_json(&text).unwrap(), summary);
}

#[test]
fn negative_sizes_are_rejected_by_field() {
    let text = VALID.replace("97.5", "-1");
    assert_eq!(
        message(&text),
        "model summary: `params_mib` must be finite and at least 0, got -1"
    );
}

#[test]
fn numbers_too_large_for_f32_are_rejected_by_field() {
    let err = message(&VALID.replace("131", "1e39"));
    assert_eq!(
        err,
        "model summary: gflops: number out of range at line 3 column 18"
    );
}

#[test]
fn nan_is_not_json_and_the_error_names_the_field() {
    let err = message(&VALID.replace("2300", "NaN"));
    assert!(err.starts_with("model summary: activations_mib: "), "{err}");
}

#[test]
fn negative_counts_are_rejected_by_field() {
    let err = message(&VALID.replace("53", "-2"));
    assert!(err.starts_with("model summary: conv_layers: "), "{err}");
}

#[test]
fn a_zero_batch_is_rejected() {
    assert_eq!(
        message(&VALID.replace("32", "0")),
        "model summary: `batch_size` must be at least 1, got 0"
    );
}

#[test]
fn unknown_fields_are_rejected_by_name() {
    let err = message(&VALID.replace("\"gflops\"", "\"gflop\""));
    assert!(err.contains("unknown field `gflop`"), "{err}");
}

#[test]
fn missing_fields_are_rejected_by_name() {
    let err = message(r#"{"params_mib": 1}"#);
    assert!(err.contains("missing field `activations_mib`"), "{err}");
}

#[test]
fn trailing_text_is_rejected() {
    let err = message(&format!("{VALID} {{}}"));
    assert!(
        err.starts_with("model summary: .: trailing characters"),
        "{err}"
    );
}
