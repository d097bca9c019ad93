#![no_main]
//! Fuzz target `table`: see `strata::fuzzing::table`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::table(data);
});
