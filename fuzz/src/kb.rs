//! The CLI's knowledge-base files (`tandem_cli::KbContents`): any text is a knowledge base or
//! an error naming the file; an accepted one written back parses to the same contents, and its
//! engine snapshot loads in the engine or is refused (the CLI loads it in the engine component,
//! the same code).

use std::path::Path;

use tandem_cli::KbContents;

/// Feeds one input to the target (inputs that are not UTF-8 are skipped, as libFuzzer's
/// `&str` targets skip them).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/kb.json");
    let contents = match KbContents::parse(path, text) {
        Ok(contents) => contents,
        Err(error) => {
            assert_eq!(error.file.as_deref(), Some(path));
            assert!(
                error.to_string().starts_with("fuzz/kb.json: "),
                "the error does not name the file: {error}"
            );
            return;
        }
    };
    let written = contents
        .to_json()
        .expect("a parsed engine snapshot is JSON");
    let written = std::str::from_utf8(&written).expect("JSON is UTF-8");
    match KbContents::parse(path, written) {
        Ok(again) => assert_eq!(again, contents, "written back, the contents change"),
        Err(error) => panic!("written back, the knowledge base is refused: {error}"),
    }
    let _ = tandem_engine::Recommender::load(&contents.engine);
}
