//! The `catalog` fuzz target: libFuzzer drives [`tandem_fuzz::catalog::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::catalog::run(data));
