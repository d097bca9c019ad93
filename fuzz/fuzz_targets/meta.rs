#![no_main]
//! Fuzz target `meta`: see `strata_server::fuzzing::meta`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata_server::fuzzing::meta(data);
});
