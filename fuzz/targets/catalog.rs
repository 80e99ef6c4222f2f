//! Catalog JSON (`tandem_catalog::Catalog::parse`): any text is a catalog or an error.
#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = tandem_catalog::Catalog::parse(text, "fuzz");
});
