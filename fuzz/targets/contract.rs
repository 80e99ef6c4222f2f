//! The `contract` fuzz target: libFuzzer drives [`tandem_fuzz::contract::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::contract::run(data));
