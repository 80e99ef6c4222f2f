//! Catalog JSON (`tandem_catalog::Catalog::parse`): any text is a catalog or an error.

/// Feeds one input to the target (inputs that are not UTF-8 are skipped, as libFuzzer's
/// `&str` targets skip them).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = tandem_catalog::Catalog::parse(text, "fuzz");
}
