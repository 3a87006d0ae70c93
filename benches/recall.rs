//! Semantic recall over 50,000 stored messages of one resource (100 threads of 500), at 1536
//! dimensions (OpenAI's text-embedding-3-small) and at 384: the store holds the messages and
//! their vectors, one `VectorIndex` loads them, then each query is timed as a run sees it:
//! the index search (one store round trip to catch up, the exact scan) and the whole recall
//! (an in-process embedder, the search, reading each hit's neighbours from the store). Also
//! prints the bytes per stored vector in process memory and in the store.
//!
//! `cargo bench --bench recall` (embedded store) or `AGENTD_BENCH_STORE=redis cargo bench
//! --bench recall`. Prints figures; asserts nothing about speed.

#[allow(dead_code)]
mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::config::RecallOptions;
use agentd::memory::recall::{RecallDeps, RecallQuery, recall};
use agentd::memory::{VectorIndex, normalize, to_bytes};
use agentd::model::{Embedder, ModelError};
use agentd::store::{Store, ThreadKey, VectorEntry, embedded::EmbeddedStore, redis::RedisStore};
use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

const MESSAGES: usize = common::scaled(50_000);
const THREADS: usize = 100;
const QUERIES: usize = common::scaled(200);

fn main() -> anyhow::Result<()> {
    common::block_on(bench())
}

/// Deterministic pseudo-random unit vectors.
struct Vectors(u64);

impl Vectors {
    fn next(&mut self, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        normalize(&mut v);
        v
    }
}

/// An embedder answering with a fixed vector at once (the model's latency is not recall's).
struct Fixed(Vec<f32>);

#[async_trait]
impl Embedder for Fixed {
    fn name(&self) -> &str {
        "bench/fixed"
    }

    async fn embed(
        &self,
        texts: Vec<String>,
        _cancel: CancellationToken,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(texts.iter().map(|_| self.0.clone()).collect())
    }
}

async fn bench() -> anyhow::Result<()> {
    let redis = match std::env::var("AGENTD_BENCH_STORE").as_deref() {
        Ok("redis") => Some(common::start_redis()?),
        _ => None,
    };
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = match &redis {
        Some(r) => Arc::new(RedisStore::connect(&r.url()).await?),
        None => Arc::new(EmbeddedStore::open(dir.path())?),
    };
    let store_name = redis.as_ref().map_or("embedded".to_owned(), |r| r.url());
    println!(
        "agentd recall benchmark: {MESSAGES} messages in {THREADS} threads of one resource, store = {store_name}, {} cores",
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    for dim in [1536, 384] {
        run(&store, redis.as_ref(), dir.path(), dim).await?;
    }
    Ok(())
}

async fn run(
    store: &Arc<dyn Store>,
    redis: Option<&common::Redis>,
    dir: &std::path::Path,
    dim: usize,
) -> anyhow::Result<()> {
    let resource = format!("bench-{dim}");
    let mut rng = Vectors(dim as u64);
    let per_thread = MESSAGES / THREADS;
    for t in 0..THREADS {
        let key = ThreadKey {
            thread_id: format!("{resource}-t{t}"),
            resource_id: resource.clone(),
        };
        let messages: Vec<Bytes> = (0..per_thread)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                let json = format!(
                    r#"{{"id":"m{t}-{i}","role":"{role}","parts":[{{"type":"text","text":"message {i} of thread {t}"}}],"created_at_ms":1700000000000}}"#
                );
                Bytes::from(json)
            })
            .collect();
        store.append_messages(&key, None, messages).await?;
    }
    let size_before = store_bytes(redis, dir, &resource).await?;
    let started = Instant::now();
    for t in 0..THREADS {
        let entries: Vec<VectorEntry> = (0..per_thread)
            .map(|i| VectorEntry {
                thread_id: format!("{resource}-t{t}"),
                position: i as u64,
                vector: to_bytes(&rng.next(dim)),
            })
            .collect();
        store.append_vectors(&resource, entries).await?;
    }
    let stored_in = started.elapsed();
    let in_store = store_bytes(redis, dir, &resource)
        .await?
        .saturating_sub(size_before);

    let index = VectorIndex::new(store.clone());
    let query = rng.next(dim);
    let started = Instant::now();
    index.search(&resource, query.clone(), 4, None).await?;
    let load = started.elapsed();
    let in_process = index.resident_bytes().await;

    let mut searches = Vec::with_capacity(QUERIES);
    for _ in 0..QUERIES {
        let q = rng.next(dim);
        let started = Instant::now();
        let hits = index.search(&resource, q, 4, None).await?;
        searches.push(started.elapsed());
        assert_eq!(hits.len(), 4);
    }
    let options = RecallOptions::default();
    let key = ThreadKey {
        thread_id: format!("{resource}-t0"),
        resource_id: resource.clone(),
    };
    let known = HashSet::new();
    let mut recalls = Vec::with_capacity(QUERIES);
    for _ in 0..QUERIES {
        let embedder = Fixed(rng.next(dim));
        let deps = RecallDeps {
            store: store.as_ref(),
            index: &index,
            embedder: &embedder,
        };
        let query = RecallQuery {
            key: &key,
            text: "what did we say".into(),
            options: &options,
            known_ids: &known,
        };
        let started = Instant::now();
        let recalled = recall(deps, query, CancellationToken::new()).await?;
        recalls.push(started.elapsed());
        assert!(recalled.system.is_some() || !recalled.same_thread.is_empty());
    }
    println!(
        "dim {dim}: stored {MESSAGES} vectors in {:.0} ms; first search (loads the index) {:.0} ms",
        common::ms(stored_in),
        common::ms(load)
    );
    report("  search (catch-up + exact top-4)", &mut searches);
    report("  recall (search + neighbours read)", &mut recalls);
    println!(
        "  bytes per stored vector: {:.0} in process ({} raw f32), {:.0} in the store",
        in_process as f64 / MESSAGES as f64,
        dim * 4,
        in_store as f64 / MESSAGES as f64
    );
    Ok(())
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    println!(
        "{what}: median {:.2} ms, p90 {:.2} ms over {} queries",
        common::ms(common::quantile(times, 0.5)),
        common::ms(common::quantile(times, 0.9)),
        times.len()
    );
}

/// What the store holds for the resource's vectors: Redis's own accounting of the vector
/// keys, or the embedded store's file size.
async fn store_bytes(
    redis: Option<&common::Redis>,
    dir: &std::path::Path,
    resource: &str,
) -> anyhow::Result<u64> {
    let Some(redis) = redis else {
        return Ok(std::fs::metadata(dir.join("agentd.redb"))?.len());
    };
    let client = redis::Client::open(redis.url())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut total = 0u64;
    let pattern = format!("agentd:{{v:{resource}}}:*");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut conn)
        .await?;
    for key in keys {
        let bytes: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut conn)
            .await?;
        total += bytes.unwrap_or(0);
    }
    Ok(total)
}
