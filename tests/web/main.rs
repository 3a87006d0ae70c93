//! Browsers and curl on the gRPC port, against a real server and the scripted model: the JSON
//! mapping driven by the real `curl` binary (unary, server streams as NDJSON and SSE, a bidi
//! stream over one HTTP/1.1 exchange (spoken directly: see `duplex`), errors, auth, trace context), gRPC-web calls as a browser
//! makes them (with CORS), and the OpenAPI document.

#[path = "../support/mod.rs"]
mod support;

mod curl;
mod duplex;
mod grpc_web;
mod json_api;
