//! A stand-in OpenAI-compatible model server for trying agentd without an API key (and for
//! benchmarks). It plans: offered the task tools, it writes the comma-separated items of the
//! prompt as a task list, then answers with a summary. Asked for the model `worker`, it also
//! completes the tasks one per step before answering (`slow-worker`: the answer streams a word
//! at a time, slowly). Any model asked `/call <tool> <json>` calls that tool, then reports its
//! result (a client tool, one that needs approval). `POST /v1/embeddings` answers with deterministic vectors (a hashed bag of
//! words), enough to try semantic recall.
//!
//! `cargo run --features mock --bin mock-openai -- --listen 127.0.0.1:8080`

use std::net::SocketAddr;
use std::sync::Arc;

use agentd::model::{MockOpenAi, scripted_reply};
use clap::Parser;

// The same allocator as agentd: a benchmark's harness should not spend its share of the two
// cores in glibc malloc's arena locks.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command-line flags.
#[derive(Parser)]
#[command(about = "A scripted OpenAI-compatible server for demos and benchmarks")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let mock = MockOpenAi::start_on(args.listen).await?;
    mock.set_recording(false);
    mock.set_fallback(Arc::new(scripted_reply));
    println!("mock OpenAI-compatible server at {}", mock.base_url());
    tokio::signal::ctrl_c().await?;
    mock.shutdown().await;
    Ok(())
}
