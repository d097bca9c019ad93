#![no_main]
//! Fuzz target `row`: see `strata::fuzzing::row`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::row(data);
});
