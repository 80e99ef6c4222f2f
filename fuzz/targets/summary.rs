//! The `summary` fuzz target: libFuzzer drives [`tandem_fuzz::summary::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::summary::run(data));
