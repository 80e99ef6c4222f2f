//! ONNX models (`tandem_declare::summarize`): any bytes are a model summary or an error, with
//! and without a batch size.

/// Feeds one input to the target.
pub fn run(bytes: &[u8]) {
    let _ = tandem_declare::summarize(bytes, None);
    let _ = tandem_declare::summarize(bytes, Some(32));
}
