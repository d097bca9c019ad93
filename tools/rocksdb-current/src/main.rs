//! The bench child for engine `rocksdb-current`: `strata bench` starts
//! this binary instead of itself for that engine, with the same arguments
//! (`bench-child --spec JSON`), and reads the same progress and result
//! lines. It holds strata-bench's child with its RocksDB C-API wrapper
//! (feature `rocksdb-current`) linked against librocksdb-sys, which builds
//! today's RocksDB from source.

// The C symbols the wrapper declares come from this crate's static library.
use librocksdb_sys as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spec = match args.iter().position(|a| a == "--spec") {
        Some(i) if i + 1 < args.len() => &args[i + 1],
        _ => {
            eprintln!("usage: strata-bench-rocksdb-current bench-child --spec JSON (started by `strata bench --rocksdb-current-bin`)");
            return ExitCode::from(2);
        }
    };
    ExitCode::from(strata_bench::child::child_main(spec).clamp(0, 255) as u8)
}
