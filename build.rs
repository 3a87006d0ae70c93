//! Compiles `proto/agentd/v1/*.proto` into `OUT_DIR` (never into `src/`) and writes the file
//! descriptor set that server reflection serves (with `proto/google/rpc/error_details.proto` and
//! `status.proto`, so reflection clients and the JSON mapping decode the details of errors).
//! Uses the protoc shipped by the `protoc-bin-vendored` crate so a fresh machine needs no
//! system protoc.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut protos: Vec<PathBuf> = std::fs::read_dir("proto/agentd/v1")?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "proto"))
        .collect();
    // Only for reflection and the JSON mapping: the Rust types of google.rpc come from
    // tonic-types.
    protos.push(PathBuf::from("proto/google/rpc/error_details.proto"));
    protos.push(PathBuf::from("proto/google/rpc/status.proto"));
    println!("cargo:rerun-if-changed=proto");

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let includes = [PathBuf::from("proto"), protoc_bin_vendored::include_path()?];
    tonic_prost_build::configure()
        // Prost with a smaller first encode buffer (an idle stream keeps its buffer).
        .codec_path("crate::api::codec::LeanCodec")
        .file_descriptor_set_path(out_dir.join("agentd_descriptor.bin"))
        .compile_with_config(config, &protos, &includes)?;
    Ok(())
}
