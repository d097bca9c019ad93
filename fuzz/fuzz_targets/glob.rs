#![no_main]
//! Fuzz target `glob`: see `strata_server::fuzzing::glob`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata_server::fuzzing::glob(data);
});
