//! The `kb` fuzz target: libFuzzer drives [`tandem_fuzz::kb::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::kb::run(data));
