//! Builds the count-only floor programs (bpf/floor.bpf.c).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("floor.skel.rs");
    SkeletonBuilder::new()
        .source(root.join("floor.bpf.c"))
        .clang_args(["-O2", "-g", "-I", root.to_str().unwrap()])
        .build_and_generate(&out)
        .expect("building bpf/floor.bpf.c (needs clang and libelf-dev)");
    println!("cargo:rerun-if-changed={}", root.join("floor.bpf.c").display());
}
