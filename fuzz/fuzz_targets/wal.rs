#![no_main]
//! Fuzz target `wal`: see `strata::fuzzing::wal`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::wal(data);
});
