#![no_main]
//! Fuzz target `resp`: see `strata_server::fuzzing::resp`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata_server::fuzzing::resp(data);
});
