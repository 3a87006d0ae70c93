//! agentd: runs AI agents (tool loops, task lists, human approvals) behind a gRPC contract.
//!
//! Layout: `api` is the gRPC edge, `tasks` holds the pure task-list rules, `tasklist` applies
//! them to stored lists, `store` hides Redis and the embedded store behind one trait, `web` holds
//! the plain-HTTP endpoints, `cli` is the command-line client (a gRPC client of a running
//! server).

pub mod agent;
pub mod api;
pub mod cli;
pub mod config;
pub mod dates;
pub mod error_text;
pub mod json;
pub mod mcp;
pub mod memory;
pub mod model;
pub mod pb;
pub mod server;
pub mod store;
pub mod tasklist;
pub mod tasks;
pub mod telemetry;
pub mod tenant;
pub mod tls;
pub mod web;
