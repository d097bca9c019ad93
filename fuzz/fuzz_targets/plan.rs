#![no_main]
//! Fuzz target `plan`: see `strata::fuzzing::plan`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::plan(data);
});
