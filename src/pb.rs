//! Code generated from `proto/agentd/v1` by build.rs (into OUT_DIR, never committed).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("agentd.v1");

/// Encoded file descriptor set of the agentd protos, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("agentd_descriptor");
