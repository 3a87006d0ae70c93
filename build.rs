//! Compiles `proto/agentd/v1/*.proto` into `OUT_DIR` (never into `src/`) and writes the file
//! descriptor set that server reflection serves (with `proto/google/rpc/error_details.proto` and
//! `status.proto`, so reflection clients and the JSON mapping decode the details of errors).
//! Uses the protoc shipped by the `protoc-bin-vendored` crate so a fresh machine needs no
//! system protoc. The chunk-streaming services are generated a second time, server side, to
//! send chunks already encoded.

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

    // The services that stream chunks again, server side only, with `Chunk` replaced by its
    // encoded bytes: a chunk is encoded once, for the run log, and those bytes are what the
    // streams send (every other type is the one generated above).
    let encoded = out_dir.join("encoded");
    std::fs::create_dir_all(&encoded)?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .codec_path("crate::api::codec::LeanCodec")
        .build_client(false)
        .out_dir(&encoded)
        .extern_path(".agentd.v1", "crate::pb")
        .extern_path(".agentd.v1.Chunk", "crate::api::encoded::EncodedChunk")
        .compile_with_config(
            config,
            &[
                PathBuf::from("proto/agentd/v1/agent.proto"),
                PathBuf::from("proto/agentd/v1/approval.proto"),
            ],
            &includes,
        )?;
    Ok(())
}
