//! The Lua scripts of the Redis store: a shared prelude (ownership, thread touch, versioned
//! compare-and-set) and one script per atomic operation of runs, documents and messages.

use std::sync::LazyLock;

use redis::Script;

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
-- Versions are compared as decimal strings, so no float rounding can make them match.
local function cas_versioned(key, expected, value, now)
  local cur = redis.call('HMGET', key, 'v', 'value')
  if (cur[1] or '0') ~= expected then
    if cur[1] then return {0, cur[1], cur[2]} end
    return {0}
  end
  if not cur[1] then redis.call('HSET', key, 'created_ms', now) end
  local v = redis.call('HINCRBY', key, 'v', 1)
  redis.call('HSET', key, 'value', value, 'updated_ms', now)
  return {1, v}
end
"#;

/// KEYS: meta, msgs, docs…; ARGV: resource, last_messages → {exists, msgs, docs}.
pub(super) static LOAD_THREAD: LazyLock<Script> = LazyLock::new(|| {
    script(
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
pub(super) static GET_DOC: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
return read_versioned(KEYS[2])
"#,
    )
});

/// KEYS: meta, doc, by_created, by_updated; ARGV: resource, expected, value, channel, thread
/// → CAS reply.
pub(super) static CAS_DOC: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
local now = now_ms()
local res = cas_versioned(KEYS[2], ARGV[2], ARGV[3], now)
if res[1] == 1 then
  touch_thread(KEYS[1], ARGV[1], now, KEYS[3], KEYS[4], ARGV[5])
  redis.call('PUBLISH', ARGV[4], res[2] .. ':' .. ARGV[3])
end
return res
"#,
    )
});

/// KEYS: meta, msgs, by_created, by_updated; ARGV: resource, thread, has_meta ('1'/'0'), meta,
/// messages… → the position of the first message appended.
pub(super) static APPEND_MESSAGES: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if not may_use(KEYS[1], ARGV[1]) then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
touch_thread(KEYS[1], ARGV[1], now_ms(), KEYS[3], KEYS[4], ARGV[2])
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'meta', ARGV[4]) end
local first = redis.call('LLEN', KEYS[2])
for i = 5, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
return first
"#,
    )
});

/// KEYS: run; ARGV: expected, value, ttl_ms → CAS reply.
pub(super) static CAS_RUN: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local res = cas_versioned(KEYS[1], ARGV[1], ARGV[2], now_ms())
if res[1] == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return res
"#,
    )
});

/// KEYS: doc; ARGV: expected, value → CAS reply (a document without expiry).
pub(super) static CAS_PLAIN: LazyLock<Script> =
    LazyLock::new(|| script("return cas_versioned(KEYS[1], ARGV[1], ARGV[2], now_ms())"));

/// KEYS: key; ARGV: value, ttl_ms → the first claimer's value, or nil when claimed now.
pub(super) static CLAIM_KEY: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"#,
    )
});

/// Builds a script from the shared prelude and a body.
pub(super) fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}
