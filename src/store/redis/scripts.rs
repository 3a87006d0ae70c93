//! The Lua scripts of the Redis store: a shared prelude (ownership, thread touch, versioned
//! compare-and-set) and one script per atomic operation of runs, documents and messages.
//!
//! Each script exists in two forms that differ only in their prelude's last helpers. On one
//! node a thread script also keeps the resource's thread listings current, and notifications
//! are `PUBLISH`ed. On a cluster the listings live in another slot, which a script must not
//! touch: there `touch_thread` and `unlist` only record the change, `reply` returns it beside
//! the result (`{result, change, now}`), and the store applies it to the listings in a second
//! call on the resource's slot; notifications are `SPUBLISH`ed on the keys' own shard.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

/// Helpers shared by every script (prepended to each body).
const PRELUDE: &str = r#"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Whether `resource` may use the thread (an absent thread is free), and the current owner.
local function may_use(meta, resource)
  local owner = redis.call('HGET', meta, 'owner')
  return (not owner) or owner == resource, owner
end
-- The newest `n` (a decimal string) messages, oldest first, skipping deleted ones (empty
-- strings: positions never move).
local function last_messages(meta, msgs, n)
  local deleted = tonumber(redis.call('HGET', meta, 'deleted') or '0')
  if deleted == 0 then return redis.call('LRANGE', msgs, '-' .. n, -1) end
  local want = math.min(tonumber(n), redis.call('LLEN', msgs))
  local raw = redis.call('LRANGE', msgs, -(want + deleted), -1)
  local kept = {}
  for i = #raw, 1, -1 do
    if #kept == want then break end
    if raw[i] ~= '' then kept[#kept + 1] = raw[i] end
  end
  local out = {}
  for i = #kept, 1, -1 do out[#out + 1] = kept[i] end
  return out
end
-- A versioned hash as {v, value}, or false when absent.
local function read_versioned(key)
  local cur = redis.call('HMGET', key, 'v', 'value')
  if cur[1] then return {cur[1], cur[2]} end
  return false
end
-- Compare-and-set of a versioned hash: {1, new_version} or {0} / {0, v, value} on conflict.
-- Versions are compared as decimal strings, so no float rounding can make them match. With
-- `same`, the stored value must also be those bytes: a version alone repeats once a deleted
-- thread is created again.
local function cas_versioned(key, expected, value, now, same)
  local cur = redis.call('HMGET', key, 'v', 'value')
  if (cur[1] or '0') ~= expected or (same and cur[2] ~= same) then
    if cur[1] then return {0, cur[1], cur[2]} end
    return {0}
  end
  if not cur[1] then redis.call('HSET', key, 'created_ms', now) end
  local v = redis.call('HINCRBY', key, 'v', 1)
  redis.call('HSET', key, 'value', value, 'updated_ms', now)
  return {1, v}
end
"#;

/// The last helpers on one node: listings updated in place, plain pub/sub.
const NODE_PRELUDE: &str = r#"
local function publish(channel, message) redis.call('PUBLISH', channel, message) end
-- Creates the thread for `resource` when absent; bumps updated_ms; keeps the resource's
-- listings (by creation, by update) current.
local function touch_thread(meta, resource, now, by_created, by_updated, thread)
  if redis.call('HSETNX', meta, 'owner', resource) == 1 then
    redis.call('HSET', meta, 'created_ms', now)
    redis.call('ZADD', by_created, now, thread)
  end
  redis.call('HSET', meta, 'updated_ms', now)
  redis.call('ZADD', by_updated, now, thread)
end
-- Removes the thread from the resource's listings.
local function unlist(by_created, by_updated, thread)
  redis.call('ZREM', by_created, thread)
  redis.call('ZREM', by_updated, thread)
end
local function reply(result) return result end
"#;

/// The last helpers on a cluster: listing changes recorded for the caller, sharded pub/sub.
const CLUSTER_PRELUDE: &str = r#"
local function publish(channel, message) redis.call('SPUBLISH', channel, message) end
-- '' none, 'c' created (list by creation and update), 'u' updated, 'd' removed.
local listing, listed_at = '', 0
local function touch_thread(meta, resource, now, by_created, by_updated, thread)
  if redis.call('HSETNX', meta, 'owner', resource) == 1 then
    redis.call('HSET', meta, 'created_ms', now)
    listing = 'c'
  elseif listing == '' then
    listing = 'u'
  end
  redis.call('HSET', meta, 'updated_ms', now)
  listed_at = now
end
local function unlist(by_created, by_updated, thread) listing = 'd' end
local function reply(result) return {result, listing, listed_at} end
"#;

/// KEYS: meta, msgs, docs…; ARGV: resource, last_messages → {exists, msgs, docs}.
pub(super) static LOAD_THREAD: LazyLock<StoreScript> = LazyLock::new(|| {
    read_script(
        r#"
local ok, owner = may_use(KEYS[1], ARGV[1])
if not ok then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
local msgs = {}
if ARGV[2] ~= '0' then msgs = last_messages(KEYS[1], KEYS[2], ARGV[2]) end
local docs = {}
for i = 3, #KEYS do docs[i - 2] = read_versioned(KEYS[i]) end
return {owner and 1 or 0, msgs, docs}
"#,
    )
});

/// KEYS: meta, doc; ARGV: resource → {v, value} or nil.
pub(super) static GET_DOC: LazyLock<StoreScript> = LazyLock::new(|| {
    read_script(
        r#"
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
return read_versioned(KEYS[2])
"#,
    )
});

/// KEYS: meta, doc, by_created, by_updated; ARGV: resource, expected, value, channel, thread
/// [, the value the stored one must be] → CAS reply.
pub(super) static CAS_DOC: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
local now = now_ms()
local res = cas_versioned(KEYS[2], ARGV[2], ARGV[3], now, ARGV[6])
if res[1] == 1 then
  touch_thread(KEYS[1], ARGV[1], now, KEYS[3], KEYS[4], ARGV[5])
  publish(ARGV[4], res[2] .. ':' .. ARGV[3])
end
return reply(res)
"#,
    )
});

/// Appends `ARGV[from..]` to a thread's messages, keys and first arguments as
/// [`APPEND_MESSAGES`] takes them (ownership already checked) → the first message's position.
const APPEND: &str = r#"
local function append_messages(now, from)
  touch_thread(KEYS[1], ARGV[1], now, KEYS[3], KEYS[4], ARGV[2])
  if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'meta', ARGV[4]) end
  local first = redis.call('LLEN', KEYS[2])
  for i = from, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
  return first
end
"#;

/// Compare-and-set of a run record with its expiry; the run joins the lease list (lease end
/// in ms) or leaves it (`''`) in the same step → CAS reply.
const WRITE_RUN: &str = r#"
local function write_run(run, leases, expected, value, ttl, lease, run_id, now)
  local res = cas_versioned(run, expected, value, now)
  if res[1] == 1 then
    redis.call('PEXPIRE', run, ttl)
    if lease == '' then
      redis.call('ZREM', leases, run_id)
    else
      redis.call('ZADD', leases, lease, run_id)
    end
  end
  return res
end
"#;

/// KEYS: meta, msgs, by_created, by_updated; ARGV: resource, thread, has_meta ('1'/'0'), meta,
/// messages… → the position of the first message appended.
pub(super) static APPEND_MESSAGES: LazyLock<StoreScript> = LazyLock::new(|| {
    script(&format!(
        r#"{APPEND}
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
return reply(append_messages(now_ms(), 5))
"#
    ))
});

/// KEYS: run; ARGV: expected, value, ttl_ms → CAS reply.
pub(super) static CAS_RUN: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local res = cas_versioned(KEYS[1], ARGV[1], ARGV[2], now_ms())
if res[1] == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return res
"#,
    )
});

/// One node: KEYS: run, leases; ARGV: expected, value, ttl_ms, lease end ms ('' = none), run
/// id → CAS reply. The run joins (or leaves) the lease list in the same step.
pub(super) static CAS_RUN_LEASED: LazyLock<StoreScript> = LazyLock::new(|| {
    script(&format!(
        r#"{WRITE_RUN}
return write_run(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], now_ms())
"#
    ))
});

/// One node: [`APPEND_MESSAGES`]'s keys and arguments, then KEYS: run, leases; ARGV:
/// [`CAS_RUN_LEASED`]'s, then the messages… → `{CAS reply}` when the record conflicts
/// (nothing written), `{CAS reply, first position}` when both are written.
pub(super) static END_RUN: LazyLock<StoreScript> = LazyLock::new(|| {
    script(&format!(
        r#"{APPEND}{WRITE_RUN}
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
local now = now_ms()
local res = write_run(KEYS[5], KEYS[6], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], now)
if res[1] ~= 1 then return {{res}} end
return {{res, append_messages(now, 10)}}
"#
    ))
});

/// KEYS: doc; ARGV: expected, value → CAS reply (a document without expiry).
pub(super) static CAS_PLAIN: LazyLock<StoreScript> =
    LazyLock::new(|| script("return cas_versioned(KEYS[1], ARGV[1], ARGV[2], now_ms())"));

/// KEYS: key; ARGV: value, ttl_ms → the first claimer's value, or nil when claimed now.
pub(super) static CLAIM_KEY: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"#,
    )
});

/// A script in its two forms, and whether it writes (a write may wait for replicas).
pub(super) struct StoreScript {
    node: Script,
    cluster: Script,
    writes: bool,
}

impl StoreScript {
    /// An invocation of the form for a cluster or for one node.
    pub(super) fn invoke(&'static self, cluster: bool) -> Invocation {
        let script = if cluster { &self.cluster } else { &self.node };
        Invocation {
            inner: script.prepare_invoke(),
            writes: self.writes,
        }
    }
}

/// A script invocation being built: keys and arguments through `Deref` to redis-rs's own.
pub(super) struct Invocation {
    inner: ScriptInvocation<'static>,
    /// Whether the script writes.
    pub(super) writes: bool,
}

impl std::ops::Deref for Invocation {
    type Target = ScriptInvocation<'static>;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl std::ops::DerefMut for Invocation {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

/// Builds a script that writes from the shared prelude and a body.
pub(super) fn script(body: &str) -> StoreScript {
    StoreScript {
        node: Script::new(&format!("{PRELUDE}{NODE_PRELUDE}{body}")),
        cluster: Script::new(&format!("{PRELUDE}{CLUSTER_PRELUDE}{body}")),
        writes: true,
    }
}

/// Builds a script that only reads.
pub(super) fn read_script(body: &str) -> StoreScript {
    StoreScript {
        writes: false,
        ..script(body)
    }
}
