//! The `extender` fuzz target: libFuzzer drives [`tandem_fuzz::extender::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::extender::run(data));
