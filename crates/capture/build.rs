//! Compiles bpf/*.bpf.c with clang and generates the libbpf-rs skeletons.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

fn skeleton(root: &Path, out: &Path, name: &str) {
    let src = root.join(format!("{name}.bpf.c"));
    let skel = out.join(format!("{name}.skel.rs"));
    if let Err(e) = SkeletonBuilder::new()
        .source(&src)
        .clang_args(["-O2", "-g", "-Wall", "-Wno-unused-function", "-I", root.to_str().unwrap()])
        .build_and_generate(&skel)
    {
        panic!(
            "building {}: {e:#}\n\
             mltrace needs clang (BPF target) and libelf: on Debian/Ubuntu `apt-get install clang libelf-dev`",
            src.display()
        );
    }
}

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    skeleton(&root, &out, "mltrace");
    skeleton(&root, &out, "probe");
    println!("cargo:rerun-if-changed={}", root.display());
}
