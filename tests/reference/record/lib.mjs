// Shared helpers for the processor fixture recorders.
//
// The recorders load @mastra/core from an npm install outside this repository:
// the directory named by MASTRA_REF_DIR, or else the current working directory.
// That directory must contain node_modules/@mastra/core (see README.md).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const EXPECTED_VERSION = '1.71.0';

export const baseDir = path.resolve(process.env.MASTRA_REF_DIR || process.cwd());
export const coreDir = path.join(baseDir, 'node_modules', '@mastra', 'core');
export const fixtureDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function corePackage() {
  const file = path.join(coreDir, 'package.json');
  if (!fs.existsSync(file)) {
    throw new Error(
      `@mastra/core not found under ${baseDir}; run "npm install @mastra/core@${EXPECTED_VERSION} zod@3" there ` +
        `and rerun from that directory or with MASTRA_REF_DIR=<dir>`,
    );
  }
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

export function coreVersion() {
  const version = corePackage().version;
  if (version !== EXPECTED_VERSION) {
    throw new Error(`expected @mastra/core ${EXPECTED_VERSION}, found ${version} in ${coreDir}`);
  }
  return version;
}

/** Import a public subpath of @mastra/core ('' for the root) through its ESM export. */
export async function importCore(subpath = '') {
  const pkg = corePackage();
  const key = subpath ? `./${subpath}` : '.';
  const entry = pkg.exports?.[key];
  if (!entry) throw new Error(`@mastra/core has no export ${key}`);
  const target =
    typeof entry === 'string'
      ? entry
      : typeof entry.import === 'string'
        ? entry.import
        : entry.import?.default ?? entry.default;
  return import(pathToFileURL(path.join(coreDir, target)).href);
}

/**
 * tokenx is a devDependency of @mastra/core and is bundled into one of its dist
 * chunks rather than installed. Find the chunk that carries tokenx's
 * estimateTokenCount and import it under its minified export alias. The bundle
 * comment names the tokenx version, which is returned alongside.
 */
export async function importBundledTokenx() {
  const dist = path.join(coreDir, 'dist');
  for (const name of fs.readdirSync(dist)) {
    if (!name.endsWith('.js')) continue;
    const file = path.join(dist, name);
    const src = fs.readFileSync(file, 'utf8');
    const region = src.match(/#region [^\n]*\/tokenx\/(\d+\.\d+\.\d+)\/[^\n]*\n/);
    if (!region || !src.includes('function estimateTokenCount(')) continue;
    const exportLine = src.match(/export \{([^}]*)\}/g)?.at(-1) ?? '';
    const alias = exportLine.match(/estimateTokenCount as ([\w$]+)/)?.[1];
    if (!alias) continue;
    const mod = await import(pathToFileURL(file).href);
    return { estimateTokenCount: mod[alias], version: region[1], chunk: name };
  }
  throw new Error('could not find the bundled tokenx estimateTokenCount in @mastra/core/dist');
}

/** A logger that drops everything (the ProcessorRunner requires one). */
export const silentLogger = new Proxy(
  {},
  {
    get: (_target, prop) => (prop === 'then' ? undefined : () => undefined),
  },
);

/** Summarize a thrown value: TripWire fields, or an error message. */
export function describeError(err) {
  if (err && err.constructor && err.constructor.name === 'TripWire') {
    return {
      tripwire: {
        message: err.message,
        retry: err.options?.retry,
        metadata: err.options?.metadata,
        processorId: err.processorId,
      },
    };
  }
  return { error: { name: err?.constructor?.name ?? typeof err, message: String(err?.message ?? err) } };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const VOLATILE_TIME_KEYS = new Set(['createdAt', 'timestamp', 'startedAt', 'endedAt', 'completedAt']);
const VOLATILE_ID_KEYS = new Set(['runId', 'messageId', 'traceId', 'spanId', 'threadId', 'resourceId']);

/**
 * Deep-copy a value into deterministic JSON: Dates and time-valued keys become
 * "<time>", UUIDs and id-valued keys become "<id>", functions and undefined
 * are dropped, and undefined object values are dropped as JSON would.
 */
export function scrub(value, key) {
  if (value === undefined || typeof value === 'function') return undefined;
  if (value instanceof Date) return '<time>';
  if (key && VOLATILE_TIME_KEYS.has(key) && (typeof value === 'number' || typeof value === 'string')) return '<time>';
  if (key && VOLATILE_ID_KEYS.has(key) && typeof value === 'string') return '<id>';
  if (typeof value === 'string') return UUID_RE.test(value) ? '<id>' : value;
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Uint8Array) return { bytes: Array.from(value) };
  if (Array.isArray(value)) return value.map(v => scrub(v) ?? null);
  if (value instanceof Map) return scrub(Object.fromEntries(value), key);
  if (value instanceof Error) return { name: value.constructor.name, message: value.message };
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    const s = scrub(v, k);
    if (s !== undefined) out[k] = s;
  }
  return out;
}

/**
 * JSON text with one-space indentation, except that an array or object whose
 * compact form fits in `width` characters stays on one line.
 */
export function formatJson(value, width = 110, indent = '') {
  const compact = JSON.stringify(value);
  if (compact === undefined) return 'null';
  if (value === null || typeof value !== 'object' || compact.length + indent.length <= width) return compact;
  const inner = indent + ' ';
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return '[\n' + value.map(v => inner + formatJson(v ?? null, width, inner)).join(',\n') + '\n' + indent + ']';
  }
  const entries = Object.entries(value).filter(([, v]) => v !== undefined && typeof v !== 'function');
  if (entries.length === 0) return '{}';
  return (
    '{\n' +
    entries.map(([k, v]) => inner + JSON.stringify(k) + ': ' + formatJson(v, width, inner)).join(',\n') +
    '\n' +
    indent +
    '}'
  );
}

export function writeFixture(name, data) {
  const file = path.join(fixtureDir, name);
  const text = formatJson(JSON.parse(JSON.stringify(data))) + '\n';
  fs.writeFileSync(file, text);
  console.log(`wrote ${file} (${text.length} bytes)`);
}

/** A MastraDBMessage (format 2) with text parts. */
export function dbMessage(id, role, texts, extra = {}) {
  return {
    id,
    role,
    createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, Number(id.replace(/\D/g, '')) || 0)),
    content: {
      format: 2,
      parts: (Array.isArray(texts) ? texts : [texts]).map(text => (typeof text === 'string' ? { type: 'text', text } : text)),
      ...extra,
    },
  };
}
