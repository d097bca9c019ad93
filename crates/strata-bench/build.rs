fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_COMPARATORS");
    if std::env::var_os("CARGO_FEATURE_ROCKSDB_CURRENT").is_some() {
        // The binary (tools/rocksdb-current) links librocksdb-sys; its
        // version is pinned there to this one.
        println!("cargo:rustc-env=STRATA_BENCH_ROCKSDB_VERSION=11.8.1 (librocksdb-sys 0.19.0, built from source)");
    }
    if std::env::var_os("CARGO_FEATURE_COMPARATORS").is_some() {
        println!("cargo:rustc-link-lib=rocksdb");
        println!("cargo:rustc-link-lib=leveldb");
        // The RocksDB C API has no version call; read it from the header.
        let header = "/usr/include/rocksdb/version.h";
        println!("cargo:rerun-if-changed={header}");
        let text = std::fs::read_to_string(header).unwrap_or_default();
        let part = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| "?".to_string())
        };
        println!(
            "cargo:rustc-env=STRATA_BENCH_ROCKSDB_VERSION={}.{}.{}",
            part("ROCKSDB_MAJOR"),
            part("ROCKSDB_MINOR"),
            part("ROCKSDB_PATCH")
        );
    }
}
