//! Model-summary JSON (`tandem_declare::read_summary_json`, what `tandem declare` prints and
//! a declared model carries): any text is a checked summary or an error.
#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = tandem_declare::read_summary_json(text);
});
