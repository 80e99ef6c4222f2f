//! The `trace` fuzz target: libFuzzer drives [`tandem_fuzz::trace::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::trace::run(data));
