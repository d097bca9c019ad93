#![no_main]
//! Fuzz target `options`: see `strata::fuzzing::options`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::options(data);
});
