//! The `intake` fuzz target: libFuzzer drives [`tandem_fuzz::intake::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::intake::run(data));
