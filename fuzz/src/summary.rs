//! Model-summary JSON (`tandem_declare::read_summary_json`, what `tandem declare` prints and
//! a declared model carries): any text is a checked summary or an error.

/// Feeds one input to the target (inputs that are not UTF-8 are skipped, as libFuzzer's
/// `&str` targets skip them).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = tandem_declare::read_summary_json(text);
}
