//! Generates Rust types for `proto/perfetto_trace.proto` with prost.
//!
//! The schema is parsed by `protox` (pure Rust), so no `protoc` is needed.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let proto_dir = manifest_dir.join("../../proto");
    let proto_file = proto_dir.join("perfetto_trace.proto");
    println!("cargo:rerun-if-changed={}", proto_file.display());
    println!("cargo:rerun-if-changed=build.rs");

    let fds = protox::compile([&proto_file], [&proto_dir])
        .unwrap_or_else(|e| panic!("failed to parse {}: {e}", proto_file.display()));
    prost_build::Config::new()
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("prost-build failed on {}: {e}", proto_file.display()));
}
