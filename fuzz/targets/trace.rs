//! Arrival-trace CSV (`tandem_catalog::Trace::parse`): any text is a trace or an error.
#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = tandem_catalog::Trace::parse(text, "fuzz");
});
