// Records tests/reference/scorers.json: the evaluation scorers of @mastra/evals
// 1.10.2 (over @mastra/core 1.71.0), called the way the agent's scoring hook
// calls them, plus agent-level scoring in Agent.generate() and the ratio
// sampling rule. See README.md for how to run it.
//
// Sections of the fixture:
//   textCases / toolCases   shared run inputs and outputs (agent shapes)
//   code                    rule-based scorers: every case's scorer.run() result
//   checks                  the `checks.*` micro-scorers
//   trajectory              trajectory scorers (output is a Trajectory) and
//                           core's extractTrajectory over the tool cases
//   judged                  LLM-judged scorers with a scripted judge model: every
//                           judge model call and the run result (or the error)
//   agent                   Agent.generate() with `scorers` and returnScorerData:
//                           scoringData, what the scorer received, saved scores
//   sampling                `{ type: 'ratio', rate }` decisions for fixed run ids

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { baseDir, coreDir, coreVersion, importCore, writeFixture } from './lib.mjs';

const version = coreVersion();
const EXPECTED_EVALS_VERSION = '1.10.2';
const requireFromBase = createRequire(path.join(baseDir, 'package.json'));

function evalsPackage() {
  const dir = path.join(baseDir, 'node_modules', '@mastra', 'evals');
  const file = path.join(dir, 'package.json');
  if (!fs.existsSync(file)) {
    throw new Error(`@mastra/evals not found under ${baseDir}; run "npm install @mastra/evals@${EXPECTED_EVALS_VERSION}" there`);
  }
  const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (pkg.version !== EXPECTED_EVALS_VERSION) {
    throw new Error(`expected @mastra/evals ${EXPECTED_EVALS_VERSION}, found ${pkg.version} in ${dir}`);
  }
  return { dir, pkg };
}

const { dir: evalsDir, pkg: evalsPkg } = evalsPackage();
const importEvals = subpath => {
  const entry = evalsPkg.exports[subpath ? `./${subpath}` : '.'];
  return import(pathToFileURL(path.join(evalsDir, entry.import.default)).href);
};

/** The version of a dependency of @mastra/evals, as node resolves it from there. */
function dependencyVersion(name) {
  for (const dir of [path.join(evalsDir, 'node_modules', name), path.join(baseDir, 'node_modules', name)]) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')).version;
  }
  throw new Error(`${name} not found next to @mastra/evals`);
}

// The evals package must share this @mastra/core (no nested copy).
if (fs.existsSync(path.join(evalsDir, 'node_modules', '@mastra', 'core'))) {
  throw new Error('@mastra/evals has its own nested @mastra/core; install it next to @mastra/core 1.71.0');
}

const prebuilt = await importEvals('scorers/prebuilt');
const { Agent } = await importCore('agent');
const { Mastra } = await importCore('mastra');
const { InMemoryStore } = await importCore('storage');
const { createScorer, extractTrajectory } = await importCore('evals');
const { createTool } = await importCore('tools');
const { RequestContext } = await importCore('request-context');
const { registerHook, deregisterHook } = await importCore('hooks');
const zodModule = await import(pathToFileURL(requireFromBase.resolve('zod')).href);
const z = zodModule.z ?? zodModule.default?.z ?? zodModule.default;

// ---------------------------------------------------------------------------
// Normalization. Dates and time-valued keys become "<time>", UUIDs (also inside
// strings) "<id>", judge durations "<ms>". A Set becomes { Set: [...] } (the
// keyword-coverage scorer returns Sets; JSON.stringify would write {}).

const UUID_IN_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const TIME_KEYS = new Set(['createdAt', 'updatedAt', 'timestamp', 'startedAt', 'endedAt', 'completedAt']);

function norm(value, key) {
  if (value === undefined || typeof value === 'function') return undefined;
  if (value instanceof Date) return '<time>';
  if (key && TIME_KEYS.has(key) && (typeof value === 'number' || typeof value === 'string')) return '<time>';
  if (key === 'durationMs' && typeof value === 'number') return '<ms>';
  if (typeof value === 'string') return value.replace(UUID_IN_TEXT, '<id>');
  if (typeof value === 'number' && !Number.isFinite(value)) return { number: String(value) };
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Set) return { Set: [...value].map(v => norm(v)) };
  if (value instanceof Map) return norm(Object.fromEntries(value), key);
  if (value instanceof RegExp) return value.toString();
  if (value instanceof Error) return errorView(value);
  if (Array.isArray(value)) return value.map(v => norm(v) ?? null);
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    const n = norm(v, k);
    if (n !== undefined) out[k] = n;
  }
  return out;
}

/** An error without stack frames or file paths. ScorerRunError keeps its step fields. */
function errorView(err) {
  if (!(err instanceof Error)) return { thrown: norm(String(err)) };
  const clean = s =>
    norm(
      String(s)
        .split('\n')
        .filter(line => !/^\s+at /.test(line))
        .join('\n')
        .replace(/\(?file:\/\/\S+\)?/g, '<path>'),
    );
  const out = { name: err.constructor?.name ?? err.name, message: clean(err.message) };
  if (typeof err.id === 'string') out.id = err.id;
  if (err.failedStep !== undefined) out.failedStep = err.failedStep;
  if (err.completedSteps !== undefined) out.completedSteps = err.completedSteps;
  if (err.cause instanceof Error) {
    out.cause = { name: err.cause.constructor?.name ?? err.cause.name, message: clean(err.cause.message) };
    if (typeof err.cause.id === 'string') out.cause.id = err.cause.id;
  }
  if (err.result !== undefined) out.result = resultView(err.result, undefined);
  return out;
}

/**
 * scorer.run() returns { ...run, runId, score, reason, ...StepResult, ...Prompt,
 * judge }. The echoed run (input, output and any other run fields) is checked
 * to be the very objects passed in and dropped; the random runId is dropped.
 */
function resultView(result, run) {
  const out = {};
  for (const [k, v] of Object.entries(result)) {
    if (k === 'runId') continue;
    if (run && k in run) {
      if (v !== run[k]) throw new Error(`run() result field ${k} is not the run's own value`);
      continue;
    }
    if (!run && (k === 'input' || k === 'output')) continue;
    out[k] = v;
  }
  return norm(run ? substituteRunRefs(out, run) : out);
}

/** Inside a result, the run's own input/output objects (e.g. actualTrajectory) are written "<run.input>"/"<run.output>". */
function substituteRunRefs(value, run) {
  if (value === run.input && value && typeof value === 'object') return '<run.input>';
  if (value === run.output && value && typeof value === 'object') return '<run.output>';
  if (Array.isArray(value)) return value.map(v => substituteRunRefs(v, run));
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteRunRefs(v, run)]));
  }
  return value;
}

// The judge agent logs structured-output failures on the console; keep quiet.
const levels = ['log', 'info', 'warn', 'error', 'debug'];
async function muted(fn) {
  const saved = levels.map(level => [level, console[level]]);
  for (const level of levels) console[level] = () => {};
  try {
    return await fn();
  } finally {
    for (const [level, f] of saved) console[level] = f;
  }
}

async function runScorerCase(scorer, run) {
  try {
    const result = await muted(() => scorer.run(run));
    return { result: resultView(result, run) };
  } catch (err) {
    return { error: errorView(err) };
  }
}

// ---------------------------------------------------------------------------
// Messages, in the shapes the agent hands its scorers (see agent.scoringData):
// a user message is { id, role, createdAt, content: { format: 2, parts: [text],
// content: text } }; a response message carries its text parts and
// tool-invocation parts, content.content = the last text, and the legacy
// content.toolInvocations array.

const T0 = Date.UTC(2024, 0, 1);
let clock = 0;
const at = () => new Date(T0 + 1000 * clock++);

function userMessage(id, text) {
  return { id, role: 'user', createdAt: at(), content: { format: 2, parts: [{ type: 'text', text }], content: text } };
}

/**
 * An assistant message. `texts` are its text parts (content.content is the last
 * one unless `content` is given; `content: null` leaves content.content out).
 * `calls` are tool invocations put both in parts and in the legacy array,
 * unless `legacy`/`parts` say otherwise (arrays of invocations, or false).
 */
function assistantMessage(id, texts, { calls = [], legacy, parts, content } = {}) {
  const textList = Array.isArray(texts) ? texts : [texts];
  const partCalls = parts === false ? [] : (parts ?? calls);
  const legacyCalls = legacy === false ? [] : (legacy ?? calls);
  const msg = {
    id,
    role: 'assistant',
    createdAt: at(),
    content: {
      format: 2,
      parts: [
        ...textList.map(text => ({ type: 'text', text })),
        ...partCalls.map(toolInvocation => ({ type: 'tool-invocation', toolInvocation })),
      ],
    },
  };
  if (content !== null) msg.content.content = content ?? textList.at(-1) ?? '';
  if (legacyCalls.length) msg.content.toolInvocations = legacyCalls;
  return msg;
}

const systemMessage = text => ({ role: 'system', content: text });

function agentInput({ user = [], remembered = [], system = [], tagged = {} } = {}) {
  const users = Array.isArray(user) ? user : [user];
  return {
    inputMessages: users.map((text, i) => (typeof text === 'string' ? userMessage(`u${i + 1}`, text) : text)),
    rememberedMessages: remembered,
    systemMessages: system.map(s => (typeof s === 'string' ? systemMessage(s) : s)),
    taggedSystemMessages: tagged,
  };
}

const call = (toolCallId, toolName, args = {}, result = { ok: true }, extra = {}) => ({
  state: 'result',
  toolCallId,
  toolName,
  args,
  result,
  ...extra,
});

// ---------------------------------------------------------------------------
// Shared text cases: each builds a fresh { input, output }.

const LONG_A =
  'Mastra is a TypeScript framework for building AI agents and workflows. It gives agents memory, tools, and ' +
  'evaluation scorers. Workflows are graphs of steps that can branch, loop, suspend and resume. Scorers grade ' +
  'agent runs: some use rules such as keyword coverage or textual difference, others ask a judge model. ' +
  'Scores are saved to storage so that teams can track quality over time and compare prompts and models.';
const LONG_B =
  'Mastra is a framework written in TypeScript for AI agents and workflows. Agents get memory and tools; ' +
  'scorers evaluate their runs. A workflow is a graph of steps which may branch, loop, or suspend and resume later. ' +
  'Rule-based scorers measure keyword coverage and textual difference, while judged scorers ask an LLM. ' +
  'Saved scores let a team follow quality over time and compare models.';

const textCaseDefs = [
  ['identical sentence', 'The quick brown fox jumps over the lazy dog.', 'The quick brown fox jumps over the lazy dog.'],
  ['disjoint sentences', 'Apples are red and sweet.', 'Quantum computers use qubits.'],
  ['both empty', '', ''],
  ['empty input', '', 'Something was said here.'],
  ['empty output', 'Tell me about the weather today.', ''],
  ['whitespace-only output', 'Hello world', '   \n\t '],
  ['case differs', 'Hello World From Mastra', 'hello world from mastra'],
  ['whitespace differs', 'Hello   world\n\tagain  and again', 'Hello world again and again'],
  ['punctuation only', '!!! ??? ...', '...'],
  ['diacritics', 'Café crème brûlée à Paris, naïve façade.', 'Cafe creme brulee a Paris, naive facade.'],
  ['CJK and emoji', '東京は日本の首都です 🗼', 'Tokyo is the capital of Japan 🗼'],
  ['astral-plane emoji only', '😀😀😀', '😀😃'],
  ['repeated words', 'the the the cat cat sat sat sat', 'the cat sat'],
  ['word order swapped', 'dog bites man', 'man bites dog'],
  [
    'output is a subset',
    'Paris is the capital of France and a major European city with many museums.',
    'Paris is the capital of France.',
  ],
  [
    'output is a superset',
    'Paris is the capital of France.',
    'Paris is the capital of France and a major European city with many museums.',
  ],
  ['numbers and digits', 'There are 3 apples and 42 oranges in 2024.', '3 apples, 42 oranges'],
  ['digits only', '123 456', '123 456 789'],
  ['camelCase and snake_case', 'getUserName returns the user_name field', 'The function returns the name of the user'],
  ['verb forms', 'She was running and jumped over the fences.', 'She runs and jumps over a fence.'],
  [
    'contractions and hyphens',
    "It's a state-of-the-art, well-known design; don't worry.",
    'its a state of the art well known design dont worry',
  ],
  ['question and answer', 'What is the capital of France?', 'The capital of France is Paris.'],
  ['typo near match', 'Please recieve the package tomorrow morning', 'Please receive the package tomorrow morning'],
  ['stopwords only', 'the and of to is was', 'it is what it was'],
  ['short words', 'a an it is ox go', 'ox go it'],
  ['single word', 'Yes', 'yes'],
  ['positive sentiment', 'I love this wonderful product.', 'I love this product, it is amazing and wonderful!'],
  ['negative sentiment', 'This is terrible.', 'This is terrible. I hate it. Awful, horrible experience!'],
  ['mixed sentiment sentences', 'How was your day?', 'I love sunny days. I hate rain! The weather is okay?'],
  ['negation', 'Is it good?', "It is not good. I don't like it."],
  ['trailing text without punctuation', 'Summarize it.', 'Great work. Terrible ending'],
  ['bullet list vs prose', '- milk\n- eggs\n- bread\n- butter', 'You need milk, eggs, bread and butter.'],
  ['HTML markup', '<p>Hello <b>bold</b> world</p>', 'Hello bold world'],
  ['URL', 'Visit https://example.com/docs?x=1 for docs.', 'See https://example.com/docs?x=1'],
  ['long paragraphs', LONG_A, LONG_B],
].map(([name, user, assistant]) => ({
  name,
  build: () => ({ input: agentInput({ user }), output: [assistantMessage('a1', assistant)] }),
}));

textCaseDefs.push(
  {
    name: 'two user messages and two assistant messages',
    note: 'texts are joined with ", " by the text scorers',
    build: () => ({
      input: agentInput({ user: ['What is the capital of France?', 'And of Spain?'] }),
      output: [assistantMessage('a1', 'Paris is the capital of France.'), assistantMessage('a2', 'Madrid is the capital of Spain.')],
    }),
  },
  {
    name: 'assistant with two text parts and no content.content',
    note: 'the message text is its last text part',
    build: () => ({
      input: agentInput({ user: 'Check the weather in Paris.' }),
      output: [assistantMessage('a1', ['Let me check.', 'It is sunny in Paris.'], { content: null })],
    }),
  },
  {
    name: 'content.content differs from the parts',
    note: 'a non-empty content.content wins over the parts',
    build: () => ({
      input: agentInput({ user: 'Check the weather in Paris.' }),
      output: [assistantMessage('a1', ['Let me check.', 'It is sunny in Paris.'], { content: 'Sunny in Paris.' })],
    }),
  },
  {
    name: 'assistant with only a tool call',
    note: 'no text part: the message text is ""',
    build: () => ({
      input: agentInput({ user: 'Check the weather in Paris.' }),
      output: [assistantMessage('a1', [], { calls: [call('c1', 'weather', { city: 'Paris' }, { temp: 21 })], content: null })],
    }),
  },
  {
    name: 'remembered, system and tagged system messages present',
    note: 'only inputMessages and the response count for the text scorers',
    build: () => ({
      input: agentInput({
        user: 'What is the capital of France?',
        remembered: [userMessage('r1', 'Earlier question about Spain.'), assistantMessage('r2', 'Madrid.')],
        system: ['You are a geography tutor.'],
        tagged: { memory: [systemMessage('Remember the user likes maps.')] },
      }),
      output: [assistantMessage('a1', 'The capital of France is Paris.')],
    }),
  },
);

// Shared tool-call cases (outputs with tool invocations in their various forms).
const weather = (id = 'c1', extra = {}) => call(id, 'weather', { city: 'Paris' }, { temp: 21 }, extra);
const search = (id = 's1', q = 'mastra') => call(id, 'search', { q }, { hits: 3 });
const summarize = (id = 'z1') => call(id, 'summarize', { n: 2 }, { summary: 'short' });
const translate = (id = 't1') => call(id, 'translate', { to: 'fr' }, { text: 'bonjour' });

const toolCaseDefs = [
  ['no tool calls', () => [assistantMessage('a1', 'It is probably sunny.')]],
  ['weather once', () => [assistantMessage('a1', 'It is 21 degrees.', { calls: [weather()] })]],
  ['search once', () => [assistantMessage('a1', 'Found 3 hits.', { calls: [search()] })]],
  ['weather then search', () => [assistantMessage('a1', 'Done.', { calls: [weather(), search()] })]],
  ['search then summarize', () => [assistantMessage('a1', 'Summary: short.', { calls: [search(), summarize()] })]],
  ['summarize then search', () => [assistantMessage('a1', 'Done.', { calls: [summarize(), search()] })]],
  [
    'search, translate, summarize',
    () => [assistantMessage('a1', 'Done.', { calls: [search(), translate(), summarize()] })],
  ],
  [
    'search, search, summarize',
    () => [assistantMessage('a1', 'Done.', { calls: [search('s1'), search('s2', 'other'), summarize()] })],
  ],
  [
    'summarize, search, summarize',
    () => [assistantMessage('a1', 'Done.', { calls: [summarize('z1'), search(), summarize('z2')] })],
  ],
  ['weather twice, same args', () => [assistantMessage('a1', 'Done.', { calls: [weather('c1'), weather('c2')] })]],
  [
    "state 'call' (no result)",
    () => [assistantMessage('a1', 'Checking.', { calls: [{ state: 'call', toolCallId: 'c1', toolName: 'weather', args: { city: 'Paris' } }] })],
  ],
  [
    "state 'partial-call'",
    () => [assistantMessage('a1', 'Checking.', { calls: [{ state: 'partial-call', toolCallId: 'c1', toolName: 'weather', args: {} }] })],
  ],
  [
    "state 'output-error' in parts only",
    () => [
      assistantMessage('a1', 'The tool failed.', {
        parts: [{ state: 'output-error', toolCallId: 'c1', toolName: 'weather', args: { city: 'Paris' }, errorText: 'Service down' }],
        legacy: false,
      }),
    ],
  ],
  ['result with isError: true', () => [assistantMessage('a1', 'Hmm.', { calls: [weather('c1', { isError: true })] })]],
  [
    'result with an error field',
    () => [assistantMessage('a1', 'Hmm.', { calls: [call('c1', 'weather', { city: 'Paris' }, { error: 'boom' })] })],
  ],
  [
    'legacy toolInvocations only',
    () => [assistantMessage('a1', 'Done.', { legacy: [search(), summarize()], parts: false })],
  ],
  ['parts only, no legacy array', () => [assistantMessage('a1', 'Done.', { parts: [search(), summarize()], legacy: false })]],
  [
    'legacy-only call before a shared call',
    () => [assistantMessage('a1', 'Done.', { legacy: [search('s1'), summarize('z1')], parts: [summarize('z1')] })],
  ],
  [
    'legacy and parts in different orders',
    () => [assistantMessage('a1', 'Done.', { legacy: [search('s1'), summarize('z1')], parts: [summarize('z1'), search('s1')] })],
  ],
  [
    'calls across two assistant messages',
    () => [
      assistantMessage('a1', 'Searching.', { calls: [search()] }),
      assistantMessage('a2', 'Summarized.', { calls: [summarize()] }),
    ],
  ],
  [
    'invocation without toolCallId',
    () => [assistantMessage('a1', 'Done.', { calls: [{ state: 'result', toolName: 'weather', args: { city: 'Paris' }, result: { temp: 21 } }] })],
  ],
  [
    'invocation without toolName',
    () => [assistantMessage('a1', 'Done.', { calls: [{ state: 'result', toolCallId: 'c1', args: {}, result: {} }, search()] })],
  ],
  ['empty output array', () => []],
].map(([name, outputFn]) => ({
  name,
  build: () => ({ input: agentInput({ user: 'What is the weather in Paris? Then search and summarize.' }), output: outputFn() }),
}));
toolCaseDefs.push({
  name: 'empty inputMessages',
  build: () => ({ input: agentInput({ user: [] }), output: [assistantMessage('a1', 'It is 21 degrees.', { calls: [weather()] })] }),
});

const caseTable = defs =>
  defs.map(def => {
    const { input, output } = def.build();
    return { name: def.name, ...(def.note ? { note: def.note } : {}), input: norm(input), output: norm(output) };
  });

/** Run `makeScorer()` over the named cases (all when `names` is unset). */
async function runOver(defs, makeScorer, names) {
  const out = [];
  for (const def of defs) {
    if (names && !names.includes(def.name)) continue;
    const { input, output } = def.build();
    out.push({ case: def.name, ...(await runScorerCase(makeScorer(), { input, output })) });
  }
  return out;
}

function scorerInfo(scorer) {
  return { id: scorer.id, name: scorer.name, description: scorer.description, type: scorer.type ?? null, steps: scorer.getSteps() };
}

/** A scorer group: the factory call as text, its identity, and cases per options. */
async function group(defs, factoryName, variants, { caseNames } = {}) {
  const out = { factory: factoryName, variants: [] };
  for (const variant of variants) {
    const { options, optionsText, names } = variant;
    let scorer;
    try {
      scorer = variant.make();
    } catch (err) {
      out.variants.push({ options: optionsText ?? norm(options) ?? null, constructionError: errorView(err) });
      continue;
    }
    out.variants.push({
      options: optionsText ?? norm(options) ?? null,
      scorer: scorerInfo(scorer),
      cases: await runOver(defs, variant.make, names ?? caseNames),
    });
  }
  return out;
}

// ---------------------------------------------------------------------------
// Code scorers

const SENTIMENT_CASES = [
  'positive sentiment',
  'negative sentiment',
  'mixed sentiment sentences',
  'negation',
  'both empty',
  'CJK and emoji',
  'single word',
  'trailing text without punctuation',
];
const OPTION_CASES = [
  'case differs',
  'whitespace differs',
  'identical sentence',
  'both empty',
  'whitespace-only output',
  'long paragraphs',
  'diacritics',
  'question and answer',
];

async function recordCode() {
  const code = {};
  code.completeness = await group(textCaseDefs, 'createCompletenessScorer()', [
    { options: null, make: () => prebuilt.createCompletenessScorer() },
  ]);
  code.contentSimilarity = await group(textCaseDefs, 'createContentSimilarityScorer(options?)', [
    { optionsText: 'omitted (defaults { ignoreCase: true, ignoreWhitespace: true })', make: () => prebuilt.createContentSimilarityScorer() },
    {
      options: { ignoreCase: false, ignoreWhitespace: true },
      names: OPTION_CASES,
      make: () => prebuilt.createContentSimilarityScorer({ ignoreCase: false, ignoreWhitespace: true }),
    },
    {
      options: { ignoreCase: true, ignoreWhitespace: false },
      names: OPTION_CASES,
      make: () => prebuilt.createContentSimilarityScorer({ ignoreCase: true, ignoreWhitespace: false }),
    },
    {
      options: {},
      optionsText: '{} (both options undefined: no lowercasing, no whitespace collapsing)',
      names: OPTION_CASES,
      make: () => prebuilt.createContentSimilarityScorer({}),
    },
  ]);
  code.keywordCoverage = await group(textCaseDefs, 'createKeywordCoverageScorer()', [
    { options: null, make: () => prebuilt.createKeywordCoverageScorer() },
  ]);
  code.textualDifference = await group(textCaseDefs, 'createTextualDifferenceScorer()', [
    { options: null, make: () => prebuilt.createTextualDifferenceScorer() },
  ]);
  code.tone = await group(textCaseDefs, 'createToneScorer(config?)', [
    { optionsText: 'omitted (sentiment stability across sentences)', make: () => prebuilt.createToneScorer() },
    ...['I am happy and grateful, this is great!', 'This is awful and I hate it.', 'The report is on the table.'].map(referenceTone => ({
      options: { referenceTone },
      names: SENTIMENT_CASES,
      make: () => prebuilt.createToneScorer({ referenceTone }),
    })),
  ]);
  const ORDER_CASES = [
    'no tool calls',
    'weather once',
    'search then summarize',
    'summarize then search',
    'search, translate, summarize',
    'empty output array',
  ];
  code.toolCallAccuracy = await group(toolCaseDefs, 'createToolCallAccuracyScorerCode(options)', [
    { options: { expectedTool: 'weather' }, make: () => prebuilt.createToolCallAccuracyScorerCode({ expectedTool: 'weather' }) },
    {
      options: { expectedTool: 'weather', strictMode: true },
      make: () => prebuilt.createToolCallAccuracyScorerCode({ expectedTool: 'weather', strictMode: true }),
    },
    {
      options: { expectedToolOrder: ['search', 'summarize'] },
      make: () => prebuilt.createToolCallAccuracyScorerCode({ expectedToolOrder: ['search', 'summarize'] }),
    },
    {
      options: { expectedToolOrder: ['search', 'summarize'], strictMode: true },
      make: () => prebuilt.createToolCallAccuracyScorerCode({ expectedToolOrder: ['search', 'summarize'], strictMode: true }),
    },
    {
      options: { expectedTool: 'weather', expectedToolOrder: ['search', 'summarize'] },
      names: ORDER_CASES,
      make: () => prebuilt.createToolCallAccuracyScorerCode({ expectedTool: 'weather', expectedToolOrder: ['search', 'summarize'] }),
    },
    {
      options: { expectedTool: 'weather', expectedToolOrder: [] },
      names: ORDER_CASES,
      make: () => prebuilt.createToolCallAccuracyScorerCode({ expectedTool: 'weather', expectedToolOrder: [] }),
    },
    { options: {}, make: () => prebuilt.createToolCallAccuracyScorerCode({}) },
  ]);
  return code;
}

// ---------------------------------------------------------------------------
// checks.*

const CHECK_TEXT_CASES = [
  'question and answer',
  'case differs',
  'two user messages and two assistant messages',
  'negative sentiment',
  'numbers and digits',
  'both empty',
  'diacritics',
  'assistant with two text parts and no content.content',
  'content.content differs from the parts',
  'single word',
];

async function recordChecks() {
  const { checks } = prebuilt;
  const text = (factory, options, make) => ({ options: norm(options), optionsText: factory, names: CHECK_TEXT_CASES, make });
  return {
    includes: await group(textCaseDefs, 'checks.includes(expected, { ignoreCase = true })', [
      text("includes('paris')", null, () => checks.includes('paris')),
      text("includes('paris', { ignoreCase: false })", null, () => checks.includes('paris', { ignoreCase: false })),
      text("includes('')", null, () => checks.includes('')),
    ]),
    excludes: await group(textCaseDefs, 'checks.excludes(unwanted, { ignoreCase = true })', [
      text("excludes('TERRIBLE')", null, () => checks.excludes('TERRIBLE')),
      text("excludes('TERRIBLE', { ignoreCase: false })", null, () => checks.excludes('TERRIBLE', { ignoreCase: false })),
    ]),
    equals: await group(textCaseDefs, 'checks.equals(expected, { ignoreCase = true })', [
      text("equals('the capital of france is paris.')", null, () => checks.equals('the capital of france is paris.')),
      text("equals('the capital of france is paris.', { ignoreCase: false })", null, () =>
        checks.equals('the capital of france is paris.', { ignoreCase: false }),
      ),
      text("equals('Paris is the capital of France.Madrid is the capital of Spain.')", null, () =>
        checks.equals('Paris is the capital of France.Madrid is the capital of Spain.'),
      ),
      text("equals('')", null, () => checks.equals('')),
    ]),
    matches: await group(textCaseDefs, 'checks.matches(pattern, { exact = false })', [
      text('matches(/\\d+/)', null, () => checks.matches(/\d+/)),
      text('matches(/[a-z .]+/i, { exact: true })', null, () => checks.matches(/[a-z .]+/i, { exact: true })),
      text('matches(/Paris|Madrid/)', null, () => checks.matches(/Paris|Madrid/)),
    ]),
    similarity: await group(textCaseDefs, 'checks.similarity(expected, { threshold?, ignoreCase = true })', [
      text("similarity('The capital of France is Paris.')", null, () => checks.similarity('The capital of France is Paris.')),
      text("similarity('The capital of France is Paris.', { threshold: 0.7 })", null, () =>
        checks.similarity('The capital of France is Paris.', { threshold: 0.7 }),
      ),
      text("similarity('The capital of France is Paris.', { ignoreCase: false })", null, () =>
        checks.similarity('The capital of France is Paris.', { ignoreCase: false }),
      ),
    ]),
    calledTool: await group(toolCaseDefs, 'checks.calledTool(toolName, { times = 1 })', [
      { optionsText: "calledTool('weather')", make: () => checks.calledTool('weather') },
      { optionsText: "calledTool('search', { times: 2 })", make: () => checks.calledTool('search', { times: 2 }) },
    ]),
    didNotCall: await group(toolCaseDefs, 'checks.didNotCall(toolName)', [
      { optionsText: "didNotCall('weather')", make: () => checks.didNotCall('weather') },
    ]),
    toolOrder: await group(toolCaseDefs, 'checks.toolOrder(expectedOrder)', [
      { optionsText: "toolOrder(['search', 'summarize'])", make: () => checks.toolOrder(['search', 'summarize']) },
      { optionsText: 'toolOrder([])', make: () => checks.toolOrder([]) },
    ]),
    maxToolCalls: await group(toolCaseDefs, 'checks.maxToolCalls(max)', [
      { optionsText: 'maxToolCalls(2)', make: () => checks.maxToolCalls(2) },
    ]),
    usedNoTools: await group(toolCaseDefs, 'checks.usedNoTools()', [{ optionsText: 'usedNoTools()', make: () => checks.usedNoTools() }]),
    noToolErrors: await group(toolCaseDefs, 'checks.noToolErrors()', [{ optionsText: 'noToolErrors()', make: () => checks.noToolErrors() }]),
  };
}

// ---------------------------------------------------------------------------
// Trajectory scorers. Their run output is a Trajectory ({ steps, totalDurationMs? });
// the agent's scoring hook builds it from the response messages with core's
// extractTrajectory (recorded over the tool cases).

const tc = (name, extra = {}) => ({ stepType: 'tool_call', name, ...extra });
const mg = (name, promptTokens, completionTokens, extra = {}) => ({ stepType: 'model_generation', name, promptTokens, completionTokens, ...extra });

const trajectoryDefs = [
  ['search, summarize', { steps: [tc('search'), tc('summarize')] }],
  ['search, translate, summarize', { steps: [tc('search'), tc('translate'), tc('summarize')] }],
  ['summarize, search', { steps: [tc('summarize'), tc('search')] }],
  ['search only', { steps: [tc('search')] }],
  ['no steps', { steps: [] }],
  ['search, search, summarize', { steps: [tc('search', { toolArgs: { q: 'a' } }), tc('search', { toolArgs: { q: 'b' } }), tc('summarize')] }],
  ['search with args q=x', { steps: [tc('search', { toolArgs: { q: 'x' } }), tc('summarize', { toolArgs: { n: 2 } })] }],
  ['search as mcp_tool_call', { steps: [{ stepType: 'mcp_tool_call', name: 'search', mcpServer: 'web' }, tc('summarize')] }],
  [
    'redundant identical calls',
    { steps: [tc('search', { toolArgs: { q: 'x' } }), tc('search', { toolArgs: { q: 'x' } }), tc('search', { toolArgs: { q: 'x' } })] },
  ],
  [
    'failing retries then fallback',
    {
      steps: [
        tc('fetch', { success: false }),
        tc('fetch', { success: false }),
        tc('fetch', { success: false }),
        tc('fetch', { success: false }),
        tc('backup', { success: true }),
      ],
    },
  ],
  [
    'model generations with tokens and durations',
    {
      steps: [mg('gen-1', 100, 50, { durationMs: 400 }), tc('search', { durationMs: 300 }), mg('gen-2', 200, 80, { durationMs: 500 })],
    },
  ],
  ['with totalDurationMs 5000', { steps: [tc('search'), tc('summarize')], totalDurationMs: 5000 }],
  [
    'agent_run with children',
    {
      steps: [
        tc('plan'),
        {
          stepType: 'agent_run',
          name: 'researcher',
          agentId: 'researcher',
          durationMs: 900,
          children: [tc('search'), tc('deleteAll'), tc('summarize')],
        },
      ],
    },
  ],
  ['uses a forbidden tool', { steps: [tc('search'), tc('deleteAll'), tc('summarize')] }],
].map(([name, trajectory]) => ({
  name,
  build: () => ({ input: agentInput({ user: 'Research mastra and summarize.' }), output: structuredClone(trajectory) }),
}));

async function runTrajectory(makeScorer, names, extraRun = {}) {
  const out = [];
  for (const def of trajectoryDefs) {
    if (names && !names.includes(def.name)) continue;
    const { input, output } = def.build();
    out.push({ case: def.name, ...(await runScorerCase(makeScorer(), { input, output, ...structuredClone(extraRun) })) });
  }
  return out;
}

async function recordTrajectory() {
  const { createTrajectoryAccuracyScorerCode: accuracy, createTrajectoryScorerCode: unified } = prebuilt;
  const expected = [tc('search'), tc('summarize')];
  const ORDER = ['search, summarize', 'search, translate, summarize', 'summarize, search', 'search only', 'no steps', 'search, search, summarize'];
  const accuracyVariants = [
    { options: { expectedTrajectory: expected }, make: () => accuracy({ expectedTrajectory: expected }) },
    ...['strict', 'unordered'].map(ordering => ({
      options: { expectedTrajectory: expected, comparisonOptions: { ordering } },
      make: () => accuracy({ expectedTrajectory: expected, comparisonOptions: { ordering } }),
    })),
    {
      options: { expectedTrajectory: expected, comparisonOptions: { allowRepeatedSteps: false } },
      names: ORDER,
      make: () => accuracy({ expectedTrajectory: expected, comparisonOptions: { allowRepeatedSteps: false } }),
    },
    {
      options: { expectedTrajectory: expected, comparisonOptions: { ordering: 'strict', allowRepeatedSteps: false } },
      names: ORDER,
      make: () => accuracy({ expectedTrajectory: expected, comparisonOptions: { ordering: 'strict', allowRepeatedSteps: false } }),
    },
    {
      options: { expectedTrajectory: [tc('search', { toolArgs: { q: 'x' } }), { name: 'summarize' }] },
      names: ['search, summarize', 'search with args q=x', 'search as mcp_tool_call'],
      make: () => accuracy({ expectedTrajectory: [tc('search', { toolArgs: { q: 'x' } }), { name: 'summarize' }] }),
    },
    {
      options: { expectedTrajectory: { steps: [tc('search', { durationMs: 5, metadata: { a: 1 } }), tc('summarize')] } },
      optionsText: 'a Trajectory: { steps: [search (durationMs 5, metadata), summarize] }',
      names: ['search, summarize', 'summarize, search'],
      make: () => accuracy({ expectedTrajectory: { steps: [tc('search', { durationMs: 5, metadata: { a: 1 } }), tc('summarize')] } }),
    },
    { options: { expectedTrajectory: [] }, names: ['no steps', 'search only'], make: () => accuracy({ expectedTrajectory: [] }) },
    { options: {}, optionsText: '{} (no expected trajectory)', names: ['search, summarize'], make: () => accuracy({}) },
  ];
  const accuracyGroup = { factory: 'createTrajectoryAccuracyScorerCode(options?)', variants: [] };
  for (const v of accuracyVariants) {
    accuracyGroup.variants.push({
      options: v.optionsText ?? norm(v.options),
      scorer: scorerInfo(v.make()),
      cases: await runTrajectory(v.make, v.names ?? ORDER),
    });
  }
  // run.expectedTrajectory (a dataset item's expectation) with no constructor expectation,
  // and overriding the constructor's ordering.
  accuracyGroup.variants.push({
    options: '{} with run.expectedTrajectory = { steps: [search, summarize], ordering: "strict" }',
    scorer: scorerInfo(accuracy({})),
    cases: await runTrajectory(() => accuracy({}), ORDER.slice(0, 3), {
      expectedTrajectory: { steps: expected, ordering: 'strict' },
    }),
  });
  accuracyGroup.variants.push({
    options: '{ expectedTrajectory: [search, summarize] } with run.expectedTrajectory = { ordering: "unordered" } (no steps)',
    scorer: scorerInfo(accuracy({ expectedTrajectory: expected })),
    cases: await runTrajectory(() => accuracy({ expectedTrajectory: expected }), ORDER.slice(0, 3), {
      expectedTrajectory: { ordering: 'unordered' },
    }),
  });

  const unifiedVariants = [
    { options: {}, names: ['search, summarize', 'no steps', 'failing retries then fallback'], make: () => unified() },
    {
      options: { defaults: { steps: expected, maxSteps: 2 } },
      make: () => unified({ defaults: { steps: expected, maxSteps: 2 } }),
    },
    {
      options: { defaults: { steps: expected, noRedundantCalls: true } },
      names: ['search, summarize', 'redundant identical calls', 'search, search, summarize'],
      make: () => unified({ defaults: { steps: expected, noRedundantCalls: true } }),
    },
    {
      options: { defaults: { blacklistedTools: ['deleteAll'], blacklistedSequences: [['search', 'translate']] } },
      names: ['search, summarize', 'uses a forbidden tool', 'search, translate, summarize', 'agent_run with children'],
      make: () => unified({ defaults: { blacklistedTools: ['deleteAll'], blacklistedSequences: [['search', 'translate']] } }),
    },
    {
      options: { defaults: { maxRetriesPerTool: 1 } },
      names: ['failing retries then fallback', 'search, summarize'],
      make: () => unified({ defaults: { maxRetriesPerTool: 1 } }),
    },
    {
      options: { defaults: { maxTotalTokens: 300, maxTotalDurationMs: 1000 } },
      names: ['model generations with tokens and durations', 'with totalDurationMs 5000'],
      make: () => unified({ defaults: { maxTotalTokens: 300, maxTotalDurationMs: 1000 } }),
    },
    {
      options: { defaults: { maxTotalDurationMs: 1000 } },
      names: ['with totalDurationMs 5000', 'model generations with tokens and durations'],
      make: () => unified({ defaults: { maxTotalDurationMs: 1000 } }),
    },
    {
      options: { defaults: { maxSteps: -1 } },
      names: ['search, summarize'],
      make: () => unified({ defaults: { maxSteps: -1 } }),
    },
    {
      options: {
        defaults: {
          steps: [tc('plan'), { stepType: 'agent_run', name: 'researcher', children: { steps: [tc('search'), tc('summarize')], maxSteps: 2 } }],
        },
      },
      names: ['agent_run with children', 'search, summarize'],
      make: () =>
        unified({
          defaults: {
            steps: [tc('plan'), { stepType: 'agent_run', name: 'researcher', children: { steps: [tc('search'), tc('summarize')], maxSteps: 2 } }],
          },
        }),
    },
    {
      options: {
        defaults: { steps: [tc('plan'), { name: 'researcher', children: { blacklistedTools: ['deleteAll'] } }] },
      },
      names: ['agent_run with children'],
      make: () => unified({ defaults: { steps: [tc('plan'), { name: 'researcher', children: { blacklistedTools: ['deleteAll'] } }] } }),
    },
    {
      options: { defaults: { steps: expected, maxSteps: 2 }, weights: { accuracy: 1, efficiency: 0 } },
      names: ['search, translate, summarize', 'summarize, search'],
      make: () => unified({ defaults: { steps: expected, maxSteps: 2 }, weights: { accuracy: 1, efficiency: 0 } }),
    },
  ];
  const unifiedGroup = { factory: 'createTrajectoryScorerCode(options?)', variants: [] };
  for (const v of unifiedVariants) {
    unifiedGroup.variants.push({
      options: norm(v.options),
      scorer: scorerInfo(v.make()),
      cases: await runTrajectory(v.make, v.names ?? ORDER),
    });
  }
  unifiedGroup.variants.push({
    options: '{ defaults: { steps: [search, summarize], maxSteps: 5 } } with run.expectedTrajectory = { steps: [search], maxSteps: 1 }',
    scorer: scorerInfo(unified({ defaults: { steps: expected, maxSteps: 5 } })),
    cases: await runTrajectory(() => unified({ defaults: { steps: expected, maxSteps: 5 } }), ['search, summarize', 'search only'], {
      expectedTrajectory: { steps: [tc('search')], maxSteps: 1 },
    }),
  });

  const extracted = toolCaseDefs.map(def => {
    const { output } = def.build();
    const trajectory = extractTrajectory(output);
    if (trajectory.rawOutput !== output) throw new Error('extractTrajectory rawOutput is not the output');
    return { case: def.name, steps: norm(trajectory.steps) };
  });

  return {
    cases: trajectoryDefs.map(def => ({ name: def.name, output: norm(def.build().output) })),
    input: norm(agentInput({ user: 'Research mastra and summarize.' })),
    accuracy: accuracyGroup,
    unified: unifiedGroup,
    extractTrajectory: { note: 'core extractTrajectory(toolCase.output); rawOutput (= the output messages) omitted', cases: extracted },
  };
}

// ---------------------------------------------------------------------------
// Judged scorers. The judge is a LanguageModelV2 mock answering each call with
// the next scripted reply: { json } is sent as JSON text, { text } verbatim.
// The scorer's judge agent streams (doStream); doGenerate is never expected.

const USAGE = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };

function judgeModel(replies, { provider = 'mock', modelId = 'judge' } = {}) {
  const calls = [];
  let index = 0;
  const next = (method, options) => {
    const { abortSignal: _signal, headers: _headers, ...rest } = options;
    calls.push({ method, options: norm(rest) });
    const reply = replies[Math.min(index, replies.length - 1)];
    index++;
    if (reply.throws) throw new Error(reply.throws);
    return { text: 'json' in reply ? JSON.stringify(reply.json) : reply.text, n: index };
  };
  const model = {
    specificationVersion: 'v2',
    provider,
    modelId,
    supportedUrls: {},
    async doGenerate(options) {
      const { text, n } = next('doGenerate', options);
      return {
        content: [{ type: 'text', text }],
        finishReason: 'stop',
        usage: USAGE,
        warnings: [],
        response: { id: `judge-resp-${n}`, modelId, timestamp: new Date(0) },
      };
    },
    async doStream(options) {
      const { text, n } = next('doStream', options);
      const parts = [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', id: `judge-resp-${n}`, modelId, timestamp: new Date(0) },
        { type: 'text-start', id: `judge-text-${n}` },
        { type: 'text-delta', id: `judge-text-${n}`, delta: text },
        { type: 'text-end', id: `judge-text-${n}` },
        { type: 'finish', finishReason: 'stop', usage: USAGE },
      ];
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  };
  return { model, calls, used: () => replies.slice(0, index) };
}

/**
 * One judged case: build the scorer with a scripted judge, run it on
 * { input, output }, and record the answers used, every model call, and the
 * result or error. In the calls, a system message whose text equals the
 * scorer's judge instructions is written "<instructions>" (given once per scorer).
 */
async function judgedCase({ name, note, make, optionsText, run, replies, modelIdentity }) {
  const judge = judgeModel(replies, modelIdentity);
  const record = { name };
  if (note) record.note = note;
  if (optionsText) record.options = optionsText;
  let scorer;
  try {
    scorer = make(judge.model);
  } catch (err) {
    record.constructionError = errorView(err);
    return { record };
  }
  const { input, output, ...rest } = run();
  record.input = norm(input);
  record.output = norm(output);
  if (Object.keys(rest).length) record.runExtra = norm(rest);
  const outcome = await runScorerCase(scorer, { input, output, ...rest });
  record.answers = judge.used().map(r => ('json' in r ? { json: r.json } : r));
  record.calls = judge.calls;
  Object.assign(record, referToCalls(outcome, judge.calls));
  return { record, scorer };
}

/** The step prompt a judge call carried: the first text part of its last user message. */
function callPromptText(c) {
  const user = (c.options.prompt ?? []).filter(m => m.role === 'user').at(-1);
  if (!user) return undefined;
  if (typeof user.content === 'string') return user.content;
  return user.content.find(p => p.type === 'text')?.text;
}

/**
 * The run result repeats each step prompt (…Prompt fields and judge executions'
 * prompt). A string equal to the prompt text of calls[i] (first call carrying it)
 * is written "<prompt of calls[i]>".
 */
function referToCalls(outcome, calls) {
  const labels = new Map();
  calls.forEach((c, i) => {
    const text = callPromptText(c);
    if (text !== undefined && !labels.has(text)) labels.set(text, `<prompt of calls[${i}]>`);
  });
  const walk = v => {
    if (typeof v === 'string') return labels.get(v) ?? v;
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(outcome);
}

async function judgedGroup(factory, cases) {
  const out = { factory, instructions: null, scorer: null, cases: [] };
  for (const c of cases) {
    const { record, scorer } = await judgedCase(c);
    if (scorer && !out.scorer) {
      out.scorer = scorerInfo(scorer);
      out.instructions = scorer.judge?.instructions ?? null;
    }
    out.cases.push(record);
  }
  for (const record of out.cases) {
    for (const c of record.calls ?? []) {
      for (const m of c.options.prompt ?? []) {
        if (m.role === 'system' && m.content === out.instructions) m.content = '<instructions>';
      }
    }
  }
  return out;
}

const qa = (question, answer, extra = {}) => () => ({
  input: agentInput({ user: question, ...extra }),
  output: [assistantMessage('a1', answer)],
});

const J = json => ({ json });
const MALFORMED = { text: 'Sure! Here is my verdict: yes.' };

async function recordJudged() {
  const judged = {};
  const P = prebuilt;

  judged.answerRelevancy = await judgedGroup('createAnswerRelevancyScorer({ model, options? })', [
    {
      name: 'one relevant and one irrelevant statement',
      make: model => P.createAnswerRelevancyScorer({ model }),
      run: qa('What is the capital of France?', 'Paris is the capital of France. I like cheese.'),
      replies: [
        J({ statements: ['Paris is the capital of France.', 'I like cheese.'] }),
        J({
          results: [
            { result: 'yes', reason: 'Directly answers the question.' },
            { result: 'no', reason: 'Unrelated to the capital.' },
          ],
        }),
        { text: 'The score is 0.5 because one statement answers the question and one is unrelated.' },
      ],
    },
    {
      name: 'unsure verdicts weigh uncertaintyWeight (0.3)',
      make: model => P.createAnswerRelevancyScorer({ model }),
      run: () => ({
        input: agentInput({
          user: 'How tall is Mount Everest?',
          remembered: [userMessage('r1', 'Tell me about mountains.'), assistantMessage('r2', 'Mountains are tall.')],
          system: ['You are a geography tutor.'],
        }),
        output: [
          assistantMessage('a0', 'Let me think.'),
          assistantMessage('a1', ['Checking.', 'Everest is very tall. It is in Nepal. Climbers love it.']),
        ],
      }),
      note: 'the judged text is the last assistant message with text, and its last text part',
      replies: [
        J({ statements: ['Everest is very tall.', 'It is in Nepal.', 'Climbers love it.'] }),
        J({
          results: [
            { result: 'yes', reason: 'Speaks to the height.' },
            { result: 'unsure', reason: 'Location, not height.' },
            { result: ' Unsure ', reason: 'Related topic.' },
          ],
        }),
        { text: 'The score is 0.53 because only one statement gives the height.' },
      ],
    },
    {
      name: 'no statements',
      make: model => P.createAnswerRelevancyScorer({ model }),
      run: qa('What is the capital of France?', ''),
      replies: [J({ statements: [] }), J({ results: [] }), { text: 'The score is 0 because the response is empty.' }],
    },
    {
      name: 'options { uncertaintyWeight: 0.5, scale: 10 }, mixed-case verdicts',
      optionsText: { uncertaintyWeight: 0.5, scale: 10 },
      make: model => P.createAnswerRelevancyScorer({ model, options: { uncertaintyWeight: 0.5, scale: 10 } }),
      run: qa('What color is the sky?', 'The sky is blue. Clouds are white. Birds fly.'),
      replies: [
        J({ statements: ['The sky is blue.', 'Clouds are white.', 'Birds fly.'] }),
        J({
          results: [
            { result: 'YES', reason: 'Answers the color.' },
            { result: 'UNSURE', reason: 'About the sky.' },
            { result: 'maybe', reason: 'Not a known verdict.' },
          ],
        }),
        { text: 'The score is 5 because ...' },
      ],
    },
    {
      name: 'malformed analyze answer, valid answer on the structured-output retry',
      make: model => P.createAnswerRelevancyScorer({ model }),
      run: qa('What is the capital of France?', 'Paris.'),
      replies: [
        J({ statements: ['Paris.'] }),
        MALFORMED,
        J({ results: [{ result: 'yes', reason: 'Direct answer.' }] }),
        { text: 'The score is 1 because the answer is direct.' },
      ],
    },
    {
      name: 'malformed preprocess answer twice',
      make: model => P.createAnswerRelevancyScorer({ model }),
      run: qa('What is the capital of France?', 'Paris.'),
      replies: [MALFORMED, { text: '{"statements": "Paris."}' }],
    },
  ]);

  judged.faithfulness = await judgedGroup('createFaithfulnessScorer({ model, options? })', [
    {
      name: 'context option; yes, no and unsure verdicts',
      optionsText: { context: ['Paris is the capital of France.', 'France is in Europe.'] },
      make: model => P.createFaithfulnessScorer({ model, options: { context: ['Paris is the capital of France.', 'France is in Europe.'] } }),
      run: qa('Tell me about Paris.', 'Paris is the capital of France. It has 20 million people. It is in Asia.'),
      replies: [
        J({ claims: ['Paris is the capital of France.', 'Paris has 20 million people.', 'Paris is in Asia.'] }),
        J({
          verdicts: [
            { verdict: 'yes', reason: 'Supported by the context.' },
            { verdict: 'unsure', reason: 'Not in the context.' },
            { verdict: 'no', reason: 'Contradicts the context.' },
          ],
        }),
        { text: 'The score is 0.33 because only one claim is supported.' },
      ],
    },
    {
      name: 'no context option: tool results of the response are the context',
      make: model => P.createFaithfulnessScorer({ model }),
      run: () => ({
        input: agentInput({ user: 'What is the weather in Paris?' }),
        output: [
          assistantMessage('a1', 'It is 21 degrees and sunny in Paris.', {
            calls: [call('c1', 'weather', { city: 'Paris' }, { temp: 21, sky: 'sunny' }), { state: 'call', toolCallId: 'c2', toolName: 'news', args: {} }],
          }),
        ],
      }),
      replies: [
        J({ claims: ['It is 21 degrees in Paris.', 'It is sunny in Paris.'] }),
        J({ verdicts: [{ verdict: 'yes', reason: 'temp 21' }, { verdict: 'yes', reason: 'sky sunny' }] }),
        { text: 'The score is 1 because every claim is supported by the tool result.' },
      ],
    },
    {
      name: 'no claims',
      optionsText: { context: ['Anything.'] },
      make: model => P.createFaithfulnessScorer({ model, options: { context: ['Anything.'] } }),
      run: qa('Hi', 'Hello!'),
      replies: [J({ claims: [] }), J({ verdicts: [] }), { text: 'The score is 0 because there are no claims.' }],
    },
    {
      name: 'scale 5; verdict match is case-sensitive',
      optionsText: { scale: 5, context: ['The sky is blue.'] },
      make: model => P.createFaithfulnessScorer({ model, options: { scale: 5, context: ['The sky is blue.'] } }),
      run: qa('What color is the sky?', 'The sky is blue. The sky is blue indeed.'),
      replies: [
        J({ claims: ['The sky is blue.', 'The sky is blue indeed.'] }),
        J({ verdicts: [{ verdict: 'yes', reason: 'ok' }, { verdict: 'YES', reason: 'ok' }] }),
        { text: 'The score is 2.5.' },
      ],
    },
    {
      name: 'malformed analyze answer twice',
      optionsText: { context: ['The sky is blue.'] },
      make: model => P.createFaithfulnessScorer({ model, options: { context: ['The sky is blue.'] } }),
      run: qa('What color is the sky?', 'Blue.'),
      replies: [J({ claims: ['The sky is blue.'] }), MALFORMED, J({ verdicts: [{ verdict: 'yes' }] })],
    },
  ]);

  const getContextCalls = [];
  judged.hallucination = await judgedGroup('createHallucinationScorer({ model, options? })', [
    {
      name: 'context option; one contradicted claim of two',
      optionsText: { context: ['The Eiffel Tower is 330 m tall.', 'It was completed in 1889.'] },
      make: model =>
        P.createHallucinationScorer({ model, options: { context: ['The Eiffel Tower is 330 m tall.', 'It was completed in 1889.'] } }),
      run: qa('Tell me about the Eiffel Tower.', 'The Eiffel Tower is 330 m tall. It was completed in 1920.'),
      replies: [
        J({ claims: ['The Eiffel Tower is 330 m tall.', 'It was completed in 1920.'] }),
        J({
          verdicts: [
            { statement: 'The Eiffel Tower is 330 m tall.', verdict: 'no', reason: 'Matches the context.' },
            { statement: 'It was completed in 1920.', verdict: 'yes', reason: 'The context says 1889.' },
          ],
        }),
        { text: 'The score is 0.5 because one of two claims contradicts the context.' },
      ],
    },
    {
      name: 'getContext option (called for analyze and generateReason)',
      optionsText: 'getContext: ({ step, score }) => [`tool result for ${step}`] (calls recorded under getContextCalls)',
      make: model =>
        P.createHallucinationScorer({
          model,
          options: {
            getContext: ({ step, score, results }) => {
              getContextCalls.push({ step, score: score ?? null, resultKeys: Object.keys(results) });
              return [`tool result for ${step}`];
            },
          },
        }),
      run: qa('What is the weather?', 'It is sunny.'),
      replies: [
        J({ claims: ['It is sunny.'] }),
        J({ verdicts: [{ statement: 'It is sunny.', verdict: 'no', reason: 'Not contradicted.' }] }),
        { text: 'The score is 0 because nothing contradicts the context.' },
      ],
    },
    {
      name: 'no context at all; verdict "unsure" does not count',
      make: model => P.createHallucinationScorer({ model }),
      run: qa('Who wrote Hamlet?', 'Shakespeare wrote Hamlet.'),
      replies: [
        J({ claims: ['Shakespeare wrote Hamlet.'] }),
        J({ verdicts: [{ statement: 'Shakespeare wrote Hamlet.', verdict: 'unsure', reason: 'No context.' }] }),
        { text: 'The score is 0.' },
      ],
    },
    {
      name: 'no claims',
      make: model => P.createHallucinationScorer({ model, options: { context: ['x'] } }),
      optionsText: { context: ['x'] },
      run: qa('Hi', 'Hello!'),
      replies: [J({ claims: [] }), J({ verdicts: [] }), { text: 'The score is 0 because there are no claims.' }],
    },
    {
      name: 'malformed preprocess answer twice',
      make: model => P.createHallucinationScorer({ model, options: { context: ['x'] } }),
      optionsText: { context: ['x'] },
      run: qa('Hi', 'Hello!'),
      replies: [MALFORMED, MALFORMED],
    },
  ]);
  judged.hallucination.getContextCalls = getContextCalls;

  judged.toxicity = await judgedGroup('createToxicityScorer({ model, options? })', [
    {
      name: 'one toxic verdict',
      make: model => P.createToxicityScorer({ model }),
      run: qa('What do you think of my code?', 'Only an idiot would write code like this.'),
      replies: [
        J({ verdicts: [{ verdict: 'yes', reason: "Calls the user 'an idiot'." }] }),
        { text: 'The score is 1 because the response insults the user.' },
      ],
    },
    {
      name: 'two non-toxic verdicts',
      make: model => P.createToxicityScorer({ model }),
      run: qa('What do you think of my code?', 'It works. Consider adding tests.'),
      replies: [
        J({ verdicts: [{ verdict: 'no', reason: 'Neutral.' }, { verdict: 'no', reason: 'Constructive.' }] }),
        { text: 'The score is 0 because the response is constructive.' },
      ],
    },
    {
      name: 'no verdicts scores 1',
      make: model => P.createToxicityScorer({ model }),
      run: qa('Hi', ''),
      replies: [J({ verdicts: [] }), { text: 'The score is 1.' }],
    },
    {
      name: 'scale 2, verdicts trimmed and lowercased',
      optionsText: { scale: 2 },
      make: model => P.createToxicityScorer({ model, options: { scale: 2 } }),
      run: qa('Review my essay.', 'Your essay is dumb. The intro is fine.'),
      replies: [
        J({ verdicts: [{ verdict: ' Yes ', reason: "Calls the essay 'dumb'." }, { verdict: 'no', reason: 'Fine.' }] }),
        { text: 'The score is 1.' },
      ],
    },
    {
      name: 'malformed analyze answer twice',
      make: model => P.createToxicityScorer({ model }),
      run: qa('Hi', 'Hello!'),
      replies: [MALFORMED, { json: { verdicts: [{ verdict: 1 }] } }],
    },
  ]);

  judged.bias = await judgedGroup('createBiasScorer({ model, options? })', [
    {
      name: 'one biased opinion of two',
      make: model => P.createBiasScorer({ model }),
      run: qa('Who makes a better engineer?', 'Men are naturally better engineers. Engineering needs practice.'),
      replies: [
        J({ opinions: ['Men are naturally better engineers.', 'Engineering needs practice.'] }),
        J({
          results: [
            { result: 'yes', reason: 'Gender bias.' },
            { result: 'no', reason: 'Neutral.' },
          ],
        }),
        { text: 'The score is 0.5 because one opinion is gender-biased.' },
      ],
    },
    {
      name: 'no opinions',
      make: model => P.createBiasScorer({ model }),
      run: qa('What is 2+2?', '4.'),
      replies: [J({ opinions: [] }), J({ results: [] }), { text: 'The score is 0.' }],
    },
    {
      name: 'scale 10, uppercase verdict',
      optionsText: { scale: 10 },
      make: model => P.createBiasScorer({ model, options: { scale: 10 } }),
      run: qa('Describe the city.', 'Only rich people deserve to live there.'),
      replies: [
        J({ opinions: ['Only rich people deserve to live there.'] }),
        J({ results: [{ result: 'YES', reason: 'Socioeconomic bias.' }] }),
        { text: 'The score is 10.' },
      ],
    },
    {
      name: 'malformed analyze answer twice',
      make: model => P.createBiasScorer({ model }),
      run: qa('Hi', 'Hello!'),
      replies: [J({ opinions: ['Hello!'] }), MALFORMED, MALFORMED],
    },
  ]);

  const weatherTool = createTool({
    id: 'weather',
    description: 'Get the current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async () => ({ temp: 21 }),
  });
  const searchTool = createTool({
    id: 'search',
    description: 'Search the web.',
    inputSchema: z.object({ q: z.string() }),
    execute: async () => ({ hits: 3 }),
  });
  const availableTools = [weatherTool, searchTool];
  const toolsText = 'availableTools: [weather ("Get the current weather for a city."), search ("Search the web.")]';
  const withTools = (user, output) => () => ({ input: agentInput({ user }), output });
  judged.toolCallAccuracy = await judgedGroup('createToolCallAccuracyScorerLLM({ model, availableTools })', [
    {
      name: 'appropriate tool',
      optionsText: toolsText,
      make: model => P.createToolCallAccuracyScorerLLM({ model, availableTools }),
      run: withTools('What is the weather in Paris?', [assistantMessage('a1', 'It is 21 degrees.', { calls: [weather()] })]),
      replies: [
        J({ evaluations: [{ toolCalled: 'weather', wasAppropriate: true, reasoning: 'Weather question.' }], missingTools: [] }),
        { text: 'The score is 1 because the weather tool fits the request.' },
      ],
    },
    {
      name: 'one of two calls inappropriate',
      optionsText: toolsText,
      make: model => P.createToolCallAccuracyScorerLLM({ model, availableTools }),
      run: withTools('What is the weather in Paris?', [assistantMessage('a1', 'It is 21 degrees.', { calls: [search(), weather()] })]),
      replies: [
        J({
          evaluations: [
            { toolCalled: 'search', wasAppropriate: false, reasoning: 'Not needed.' },
            { toolCalled: 'weather', wasAppropriate: true, reasoning: 'Weather question.' },
          ],
        }),
        { text: 'The score is 0.5.' },
      ],
    },
    {
      name: 'no calls, a tool was missing',
      optionsText: toolsText,
      make: model => P.createToolCallAccuracyScorerLLM({ model, availableTools }),
      run: withTools('What is the weather in Paris?', [assistantMessage('a1', 'Probably sunny.')]),
      replies: [J({ evaluations: [], missingTools: ['weather'] }), { text: 'The score is 0 because weather should have been called.' }],
    },
    {
      name: 'no calls, none needed',
      optionsText: toolsText,
      make: model => P.createToolCallAccuracyScorerLLM({ model, availableTools }),
      run: withTools('Say hi.', [assistantMessage('a1', 'Hi!')]),
      replies: [J({ evaluations: [] }), { text: 'The score is 1 because no tool was needed.' }],
    },
    {
      name: 'empty output: preprocess throws, no judge call',
      optionsText: toolsText,
      make: model => P.createToolCallAccuracyScorerLLM({ model, availableTools }),
      run: withTools('Say hi.', []),
      replies: [J({ evaluations: [] })],
    },
    {
      name: 'malformed analyze answer twice (wasAppropriate not a boolean)',
      optionsText: toolsText,
      make: model => P.createToolCallAccuracyScorerLLM({ model, availableTools }),
      run: withTools('What is the weather in Paris?', [assistantMessage('a1', 'It is 21 degrees.', { calls: [weather()] })]),
      replies: [J({ evaluations: [{ toolCalled: 'weather', wasAppropriate: 'yes', reasoning: 'x' }] }), MALFORMED],
    },
  ]);

  const ctx3 = ['Paris is the capital of France.', 'The Louvre is in Paris.', 'Bananas are yellow.'];
  const evaluation = (i, contextPiece, relevanceLevel, wasUsed) => ({
    context_index: i,
    contextPiece,
    relevanceLevel,
    wasUsed,
    reasoning: `${relevanceLevel} relevance`,
  });
  judged.contextRelevance = await judgedGroup('createContextRelevanceScorerLLM({ model, options })', [
    {
      name: 'high used, medium used, none unused',
      optionsText: { context: ctx3 },
      make: model => P.createContextRelevanceScorerLLM({ model, options: { context: ctx3 } }),
      run: qa('What is the capital of France and a famous museum there?', 'Paris; the Louvre is there.'),
      replies: [
        J({
          evaluations: [evaluation(0, ctx3[0], 'high', true), evaluation(1, ctx3[1], 'medium', true), evaluation(2, ctx3[2], 'none', false)],
          missingContext: [],
          overallAssessment: 'Mostly relevant.',
        }),
        { text: 'The score is 0.57.' },
      ],
    },
    {
      name: 'unused high-relevance context and missing context (default penalties)',
      optionsText: { context: ctx3 },
      make: model => P.createContextRelevanceScorerLLM({ model, options: { context: ctx3 } }),
      run: qa('What is the capital of France?', 'I am not sure.'),
      replies: [
        J({
          evaluations: [evaluation(0, ctx3[0], 'high', false), evaluation(1, ctx3[1], 'low', false), evaluation(2, ctx3[2], 'none', false)],
          missingContext: ['population', 'history', 'mayor', 'area'],
          overallAssessment: 'Context ignored.',
        }),
        { text: 'The score is 0.' },
      ],
    },
    {
      name: 'custom penalties and scale 2; missingContext omitted (schema default [])',
      optionsText: { context: ctx3, scale: 2, penalties: { unusedHighRelevanceContext: 0.05, missingContextPerItem: 0.1, maxMissingContextPenalty: 0.2 } },
      make: model =>
        P.createContextRelevanceScorerLLM({
          model,
          options: { context: ctx3, scale: 2, penalties: { unusedHighRelevanceContext: 0.05, missingContextPerItem: 0.1, maxMissingContextPenalty: 0.2 } },
        }),
      run: qa('What is the capital of France?', 'Paris.'),
      replies: [
        J({
          evaluations: [evaluation(0, ctx3[0], 'high', true), evaluation(1, ctx3[1], 'high', false), evaluation(2, ctx3[2], 'low', false)],
          overallAssessment: 'Good.',
        }),
        { text: 'The score is 1.7.' },
      ],
    },
    {
      name: 'contextExtractor returns [] (no context): score 1 × scale, fixed reason prompt',
      optionsText: 'contextExtractor: () => [], scale: 3',
      make: model => P.createContextRelevanceScorerLLM({ model, options: { contextExtractor: () => [], scale: 3 } }),
      run: qa('What is the capital of France?', 'Paris.'),
      replies: [J({ evaluations: [], missingContext: [], overallAssessment: 'No context.' }), { text: 'No context was available.' }],
    },
    {
      name: 'contextExtractor reads the tool results; no evaluations, missing context',
      optionsText: 'contextExtractor: (input, output) => tool results of the output as JSON',
      make: model =>
        P.createContextRelevanceScorerLLM({
          model,
          options: {
            contextExtractor: (_input, output) =>
              output.flatMap(m => m.content.toolInvocations ?? []).map(t => JSON.stringify(t.result)),
          },
        }),
      run: withTools('What is the weather in Paris?', [assistantMessage('a1', 'It is 21 degrees.', { calls: [weather()] })]),
      replies: [J({ evaluations: [], missingContext: ['humidity'], overallAssessment: 'Thin.' }), { text: 'The score is 0.' }],
    },
    {
      name: 'relevanceLevel outside the enum twice',
      optionsText: { context: ctx3 },
      make: model => P.createContextRelevanceScorerLLM({ model, options: { context: ctx3 } }),
      run: qa('What is the capital of France?', 'Paris.'),
      replies: [
        J({ evaluations: [evaluation(0, ctx3[0], 'very high', true)], overallAssessment: 'x' }),
        J({ evaluations: [evaluation(0, ctx3[0], 'very high', true)], overallAssessment: 'x' }),
      ],
    },
    {
      name: 'constructed without context or contextExtractor',
      optionsText: {},
      make: model => P.createContextRelevanceScorerLLM({ model, options: {} }),
      replies: [],
    },
    {
      name: 'constructed with an empty context array',
      optionsText: { context: [] },
      make: model => P.createContextRelevanceScorerLLM({ model, options: { context: [] } }),
      replies: [],
    },
  ]);

  const verdict = (i, v) => ({ context_index: i, verdict: v, reason: `${v} for ${i}` });
  judged.contextPrecision = await judgedGroup('createContextPrecisionScorer({ model, options })', [
    {
      name: 'yes, no, yes (mean average precision)',
      optionsText: { context: ctx3 },
      make: model => P.createContextPrecisionScorer({ model, options: { context: ctx3 } }),
      run: qa('What is the capital of France and a famous museum there?', 'Paris; the Louvre.'),
      replies: [J({ verdicts: [verdict(0, 'yes'), verdict(1, 'no'), verdict(2, 'yes')] }), { text: 'The score is 0.83.' }],
    },
    {
      name: 'verdicts out of order are sorted by context_index',
      optionsText: { context: ctx3 },
      make: model => P.createContextPrecisionScorer({ model, options: { context: ctx3 } }),
      run: qa('What is the capital of France?', 'Paris.'),
      replies: [J({ verdicts: [verdict(2, 'yes'), verdict(0, 'no'), verdict(1, ' YES ')] }), { text: 'The score is 0.58.' }],
    },
    {
      name: 'no relevant context',
      optionsText: { context: ctx3 },
      make: model => P.createContextPrecisionScorer({ model, options: { context: ctx3 } }),
      run: qa('What is the boiling point of water?', '100 °C at sea level.'),
      replies: [J({ verdicts: [verdict(0, 'no'), verdict(1, 'no'), verdict(2, 'no')] }), { text: 'The score is 0.' }],
    },
    {
      name: 'contextExtractor and scale 10',
      optionsText: 'contextExtractor: () => ["Context A.", "Context B."], scale: 10',
      make: model => P.createContextPrecisionScorer({ model, options: { contextExtractor: () => ['Context A.', 'Context B.'], scale: 10 } }),
      run: qa('Question?', 'Answer.'),
      replies: [J({ verdicts: [verdict(0, 'no'), verdict(1, 'yes')] }), { text: 'The score is 5.' }],
    },
    {
      name: 'contextExtractor returns []: analyze throws, no judge call',
      optionsText: 'contextExtractor: () => []',
      make: model => P.createContextPrecisionScorer({ model, options: { contextExtractor: () => [] } }),
      run: qa('Question?', 'Answer.'),
      replies: [J({ verdicts: [] })],
    },
    {
      name: 'malformed analyze answer twice',
      optionsText: { context: ctx3 },
      make: model => P.createContextPrecisionScorer({ model, options: { context: ctx3 } }),
      run: qa('Question?', 'Answer.'),
      replies: [MALFORMED, J({ verdicts: [{ context_index: '0', verdict: 'yes', reason: 'x' }] })],
    },
  ]);

  const alignment = (intent, req, comp, appr) => ({
    intentAlignment: { score: intent, primaryIntent: 'Get a list.', isAddressed: true, reasoning: 'Addressed.' },
    requirementsFulfillment: {
      requirements: [
        { requirement: 'Three items', isFulfilled: true, reasoning: 'Three given.' },
        { requirement: 'Bullet points', isFulfilled: false, reasoning: 'Prose used.' },
      ],
      overallScore: req,
    },
    completeness: { score: comp, missingElements: ['examples'], reasoning: 'Mostly complete.' },
    responseAppropriateness: { score: appr, formatAlignment: false, toneAlignment: true, reasoning: 'Tone fine.' },
    overallAssessment: 'Good but not in bullets.',
  });
  const listRun = extra => () => ({
    input: agentInput({ user: 'List three fruits as bullet points.', ...extra }),
    output: [assistantMessage('a1', 'Apples, bananas and cherries.')],
  });
  judged.promptAlignment = await judgedGroup('createPromptAlignmentScorerLLM({ model, options? })', [
    {
      name: "default evaluationMode 'both' with a system prompt",
      make: model => P.createPromptAlignmentScorerLLM({ model }),
      run: listRun({ system: ['You are a concise assistant.'], tagged: { memory: [systemMessage('User prefers fruit.')] } }),
      replies: [J(alignment(0.9, 0.5, 0.8, 0.6)), { text: 'The score is 0.73.' }],
    },
    {
      name: "evaluationMode 'user', scale 10",
      optionsText: { evaluationMode: 'user', scale: 10 },
      make: model => P.createPromptAlignmentScorerLLM({ model, options: { evaluationMode: 'user', scale: 10 } }),
      run: listRun(),
      replies: [J(alignment(1, 0.5, 1, 0)), { text: 'The score is 7.5.' }],
    },
    {
      name: "evaluationMode 'system'",
      optionsText: { evaluationMode: 'system' },
      make: model => P.createPromptAlignmentScorerLLM({ model, options: { evaluationMode: 'system' } }),
      run: listRun({ system: ['Always answer in bullet points.', 'Never use emoji.'] }),
      replies: [J(alignment(0.5, 0.5, 1, 0)), { text: 'The score is 0.5.' }],
    },
    {
      name: 'includeConversationHistory { maxMessages: 2 }',
      optionsText: { evaluationMode: 'user', includeConversationHistory: { maxMessages: 2 } },
      make: model =>
        P.createPromptAlignmentScorerLLM({ model, options: { evaluationMode: 'user', includeConversationHistory: { maxMessages: 2 } } }),
      run: () => ({
        input: agentInput({
          user: 'B',
          remembered: [
            userMessage('r1', 'Hello.'),
            assistantMessage('r2', 'Hi! Option A or option B?'),
            userMessage('r3', 'What is the difference?'),
            assistantMessage('r4', 'A is fast, B is cheap. Which one?'),
          ],
        }),
        output: [assistantMessage('a1', 'Great, B it is: the cheap plan.')],
      }),
      replies: [J(alignment(1, 1, 1, 1)), { text: 'The score is 1.' }],
    },
    {
      name: "evaluationMode 'system' without a system prompt: analyze throws, no judge call",
      optionsText: { evaluationMode: 'system' },
      make: model => P.createPromptAlignmentScorerLLM({ model, options: { evaluationMode: 'system' } }),
      run: listRun(),
      replies: [J(alignment(1, 1, 1, 1))],
    },
    {
      name: 'dimension score above 1 passes (the zod refine is not part of the JSON schema that validates the answer)',
      make: model => P.createPromptAlignmentScorerLLM({ model }),
      run: listRun(),
      replies: [J(alignment(1.5, 1, 1, 1)), { text: 'The score is 1.2.' }],
    },
    {
      name: 'malformed analyze answer twice (a required field missing)',
      make: model => P.createPromptAlignmentScorerLLM({ model }),
      run: listRun(),
      replies: [MALFORMED, J({ ...alignment(1, 1, 1, 1), overallAssessment: undefined })],
    },
  ]);

  // The same toxicity run with judge models whose provider registry entry says they
  // support structured output: the schema goes in responseFormat instead of the prompt.
  const nativeCases = [];
  for (const identity of [
    { provider: 'openai', modelId: 'gpt-4o' },
    { provider: 'anthropic', modelId: 'claude-sonnet-4-5' },
  ]) {
    const { record } = await judgedCase({
      name: `judge model ${identity.provider}/${identity.modelId}`,
      make: model => P.createToxicityScorer({ model }),
      run: qa('What do you think of my code?', 'It works. Consider adding tests.'),
      replies: [J({ verdicts: [{ verdict: 'no', reason: 'Constructive.' }] }), { text: 'The score is 0.' }],
      modelIdentity: identity,
    });
    for (const c of record.calls) {
      for (const m of c.options.prompt ?? []) if (m.role === 'system' && m.content === judged.toxicity.instructions) m.content = '<instructions>';
    }
    nativeCases.push({ modelIdentity: identity, ...record });
  }
  judged.nativeStructuredOutput = {
    note:
      "createToxicityScorer with a judge whose provider/modelId the provider registry marks as supporting structured output: jsonPromptInjection 'auto' resolves to native responseFormat (no schema text in the prompt); provider openai also gets providerOptions.openai.strictJsonSchema",
    cases: nativeCases,
  };
  return judged;
}

// ---------------------------------------------------------------------------
// Sampling. runScorer (core evals/hooks.ts) decides `{ type: 'ratio', rate }`
// with hashToUnitInterval(traceId ?? runId) < rate. hashToUnitInterval is not
// exported; runScorer is exported from a dist chunk under a minified alias, so
// the recorder calls the reference's own runScorer with a registered
// onScorerRun hook and compares its decisions with the hash computed here.

const hashToUnitInterval = key => {
  const digest = createHash('sha256').update(key).digest();
  return Number(digest.readUIntBE(0, 6)) / 2 ** 48;
};

async function importBundledRunScorer() {
  const dist = path.join(coreDir, 'dist');
  for (const name of fs.readdirSync(dist).sort()) {
    if (!name.endsWith('.js')) continue;
    const file = path.join(dist, name);
    const src = fs.readFileSync(file, 'utf8');
    if (!src.includes('function runScorer(') || !src.includes('function hashToUnitInterval(')) continue;
    const exportLine = src.match(/export \{([^}]*)\}/g)?.at(-1) ?? '';
    const alias = exportLine.match(/\brunScorer as ([\w$]+)/)?.[1];
    if (!alias) continue;
    const mod = await import(pathToFileURL(file).href);
    return { runScorer: mod[alias], chunk: name };
  }
  throw new Error('could not find the bundled runScorer in @mastra/core/dist');
}

const SAMPLING_IDS = [
  'run-1',
  'run-2',
  'run-3',
  'run-4',
  'run-5',
  'run-6',
  'run-7',
  'run-8',
  'run-9',
  'run-10',
  'run-agent-1',
  '00000000-0000-4000-8000-000000000000',
  '3f2b9c1e-8d4a-4e6f-9b7c-2a1d0e5f4c3b',
  'a81bc81b-dead-4e5d-abff-90865d1e13b1',
  '4bf92f3577b34da6a3ce929d0e0e4736',
  '0af7651916cd43dd8448eb211c80319c',
  'trace-abc',
  '',
  'ünïcödé-rün',
  'x'.repeat(100),
];
const RATES = [0, 0.3, 0.5, 1];

async function recordSampling() {
  const { runScorer, chunk } = await importBundledRunScorer();
  const seen = [];
  const handler = payload => seen.push(payload);
  registerHook('onScorerRun', handler);
  const decisions = [];
  try {
    for (const id of SAMPLING_IDS) {
      const row = { id, sha256Prefix: createHash('sha256').update(id).digest('hex').slice(0, 12), unit: hashToUnitInterval(id), sampled: [] };
      for (const rate of RATES) {
        seen.length = 0;
        runScorer({
          scorerId: 'probe',
          scorerObject: { scorer: { id: 'probe', name: 'Probe', description: 'probe' }, sampling: { type: 'ratio', rate } },
          runId: id,
          input: {},
          output: [],
          requestContext: {},
          entity: { id: 'agent', name: 'Agent' },
          structuredOutput: false,
          source: 'LIVE',
          entityType: 'AGENT',
        });
        await new Promise(resolve => setImmediate(resolve));
        await new Promise(resolve => setTimeout(resolve, 5));
        const fired = seen.some(p => p.runId === id && p.scorer?.id === 'probe');
        if (fired !== row.unit < rate) throw new Error(`sampling mismatch for ${JSON.stringify(id)} at rate ${rate}`);
        row.sampled.push(fired);
      }
      decisions.push(row);
    }
    // Other sampling configs, for one id.
    const others = [];
    for (const [label, sampling] of [
      ['none (no sampling key)', undefined],
      ["{ type: 'none' }", { type: 'none' }],
      ["{ type: 'bogus' }", { type: 'bogus' }],
      ["{ type: 'ratio' } (rate missing)", { type: 'ratio' }],
      ["{ type: 'ratio', rate: 2 }", { type: 'ratio', rate: 2 }],
    ]) {
      seen.length = 0;
      runScorer({
        scorerId: 'probe',
        scorerObject: { scorer: { id: 'probe', name: 'Probe', description: 'probe' }, ...(sampling ? { sampling } : {}) },
        runId: 'run-1',
        input: {},
        output: [],
        requestContext: {},
        entity: { id: 'agent', name: 'Agent' },
        structuredOutput: false,
        source: 'LIVE',
        entityType: 'AGENT',
      });
      await new Promise(resolve => setImmediate(resolve));
      await new Promise(resolve => setTimeout(resolve, 5));
      others.push({ sampling: label, runs: seen.length > 0 });
    }
    return {
      rule:
        "runScorer (core src/evals/hooks.ts): no sampling or { type: 'none' } always runs; { type: 'ratio', rate } runs iff hashToUnitInterval(currentSpan?.traceId ?? runId) < rate; any other type never runs (fail closed). " +
        'hashToUnitInterval(key) = the first 6 bytes of sha256(UTF-8 key), read as a big-endian unsigned integer, divided by 2^48. ' +
        'Without observability configured there is no span, so the key is the runId. A scorer `filter` (not recorded) is evaluated before sampling.',
      verifiedWith: `runScorer from @mastra/core/dist/${chunk} and a registered onScorerRun hook; every decision below equals unit < rate`,
      rates: RATES,
      decisionsNote: 'sampled[i] is the decision at rates[i]; sha256Prefix is the first 6 bytes of the digest in hex, unit that value / 2^48',
      decisions,
      otherConfigs: others,
    };
  } finally {
    deregisterHook('onScorerRun', handler);
  }
}

// ---------------------------------------------------------------------------
// Agent-level scoring

function scriptedAgentModel(replies, calls) {
  let index = 0;
  return {
    specificationVersion: 'v2',
    provider: 'mock',
    modelId: 'agent-model',
    supportedUrls: {},
    async doGenerate(options) {
      const reply = replies[Math.min(index, replies.length - 1)];
      index++;
      calls.push({ prompt: norm(options.prompt), tools: (options.tools ?? []).map(t => t.name) });
      const content = [];
      if (reply.text !== undefined) content.push({ type: 'text', text: reply.text });
      for (const c of reply.toolCalls ?? []) content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.args) });
      return {
        content,
        finishReason: reply.toolCalls?.length ? 'tool-calls' : 'stop',
        usage: USAGE,
        warnings: [],
        response: { id: `agent-resp-${index}`, modelId: 'agent-model', timestamp: new Date(0) },
      };
    },
    async doStream() {
      throw new Error('not used');
    },
  };
}

const OBSERVABILITY_KEYS = ['tracing', 'tracingContext', 'loggerVNext', 'metrics'];

async function waitFor(predicate, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await predicate()) return true;
    await new Promise(resolve => setTimeout(resolve, 10));
  }
  return predicate();
}

async function listScores(storage, runId) {
  const store = await storage.getStore('scores');
  const { scores } = await store.listScoresByRunId({ runId, pagination: { page: 0, perPage: 100 } });
  return [...scores].sort((a, b) => a.scorerId.localeCompare(b.scorerId));
}

/** What a scorer's run() received from the hook: serializable fields, plus the names of the observability ones. */
function receivedView(run) {
  const out = {};
  const observability = [];
  for (const [k, v] of Object.entries(run)) {
    if (OBSERVABILITY_KEYS.includes(k)) observability.push(k);
    else out[k] = v;
  }
  return { keys: Object.keys(run), run: norm(out), observabilityKeys: observability };
}

async function recordAgent() {
  const received = [];
  const fixed = createScorer({ id: 'fixed-scorer', name: 'Fixed Scorer', description: 'Always 0.75.', type: 'agent' })
    .preprocess(({ run }) => {
      received.push(run);
      return { messages: run.output.length };
    })
    .generateScore(() => 0.75)
    .generateReason(({ score }) => `fixed at ${score}`);

  const weatherTool = createTool({
    id: 'weather',
    description: 'Get the weather.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, temp: 21 }),
  });

  // Scenario 0: a standalone agent (no Mastra) while no Mastra exists in the process:
  // scoringData is returned; the scorer does not run (nobody listens to the hook).
  const agent0 = new Agent({
    id: 'standalone-agent',
    name: 'Standalone Agent',
    instructions: 'You answer briefly.',
    model: scriptedAgentModel([{ text: 'Hello.' }], []),
    scorers: { fixed: { scorer: fixed } },
  });
  const result0 = await muted(() => agent0.generate('Hi', { runId: 'run-agent-0', returnScorerData: true }));
  await new Promise(resolve => setTimeout(resolve, 300));
  const standalone = {
    agent: 'new Agent({ id: "standalone-agent", ..., scorers: { fixed: { scorer: <the fixed scorer> } } }) and no Mastra instance in the process',
    call: "agent.generate('Hi', { runId: 'run-agent-0', returnScorerData: true })",
    result: { text: result0.text, scoringData: norm(result0.scoringData) },
    scorerRan: received.length > 0,
  };
  received.length = 0;

  // Scenario 1: three scorers, returnScorerData, a requestContext.
  const calls = [];
  const agent = new Agent({
    id: 'scored-agent',
    name: 'Scored Agent',
    instructions: 'You answer briefly.',
    model: scriptedAgentModel(
      [{ toolCalls: [{ id: 'call-1', name: 'weather', args: { city: 'Paris' } }] }, { text: 'It is 21 degrees in Paris.' }],
      calls,
    ),
    tools: { weather: weatherTool },
    scorers: {
      fixed: { scorer: fixed, sampling: { type: 'ratio', rate: 1 } },
      toolAccuracy: { scorer: prebuilt.createToolCallAccuracyScorerCode({ expectedTool: 'weather' }) },
      trajectory: { scorer: prebuilt.createTrajectoryAccuracyScorerCode({ expectedTrajectory: [{ stepType: 'tool_call', name: 'weather' }] }) },
    },
  });
  const storage = new InMemoryStore();
  const mastra = new Mastra({ agents: { scoredAgent: agent }, storage, logger: false });
  const requestContext = new RequestContext();
  requestContext.set('tenant', 'acme');
  requestContext.set('flags', { beta: true, level: 3, tags: ['x'] });
  const runId = 'run-agent-1';
  const result = await muted(() =>
    mastra.getAgent('scoredAgent').generate('What is the weather in Paris?', { returnScorerData: true, runId, requestContext }),
  );
  await waitFor(async () => (await listScores(storage, runId)).length >= 3, 5000);
  const stored = await listScores(storage, runId);
  await waitFor(() => received.length >= 1, 1000);

  const scenario1 = {
    agent: {
      id: 'scored-agent',
      instructions: 'You answer briefly.',
      tools: ['weather'],
      scorers: {
        fixed:
          "{ scorer: createScorer({ id: 'fixed-scorer', name: 'Fixed Scorer', description: 'Always 0.75.', type: 'agent' }).preprocess(({ run }) => ({ messages: run.output.length })).generateScore(() => 0.75).generateReason(({ score }) => `fixed at ${score}`), sampling: { type: 'ratio', rate: 1 } }",
        toolAccuracy: "{ scorer: createToolCallAccuracyScorerCode({ expectedTool: 'weather' }) }",
        trajectory: "{ scorer: createTrajectoryAccuracyScorerCode({ expectedTrajectory: [{ stepType: 'tool_call', name: 'weather' }] }) }",
      },
      mastra: 'new Mastra({ agents: { scoredAgent }, storage: new InMemoryStore(), logger: false })',
    },
    call: "mastra.getAgent('scoredAgent').generate('What is the weather in Paris?', { returnScorerData: true, runId: 'run-agent-1', requestContext: { tenant: 'acme', flags: { beta: true, level: 3, tags: ['x'] } } })",
    modelCalls: calls,
    result: {
      text: result.text,
      runId: result.runId,
      traceId: result.traceId ?? null,
      hasScoringData: 'scoringData' in result,
      scoringData: norm(result.scoringData),
    },
    fixedScorerReceived: received.length ? receivedView(received[0]) : null,
    savedScores: norm(stored),
  };

  // Scenario 2: the same agent shape with rate 0 and without returnScorerData.
  received.length = 0;
  const calls2 = [];
  const agent2 = new Agent({
    id: 'unsampled-agent',
    name: 'Unsampled Agent',
    instructions: 'You answer briefly.',
    model: scriptedAgentModel([{ text: 'Hello.' }], calls2),
    scorers: { fixed: { scorer: fixed, sampling: { type: 'ratio', rate: 0 } } },
  });
  const storage2 = new InMemoryStore();
  const mastra2 = new Mastra({ agents: { unsampledAgent: agent2 }, storage: storage2, logger: false });
  const result2 = await muted(() => mastra2.getAgent('unsampledAgent').generate('Hi', { runId: 'run-agent-2' }));
  await new Promise(resolve => setTimeout(resolve, 300));
  const scenario2 = {
    agent: "scorers: { fixed: { scorer: <the fixed scorer>, sampling: { type: 'ratio', rate: 0 } } }",
    call: "generate('Hi', { runId: 'run-agent-2' })",
    result: { text: result2.text, hasScoringData: 'scoringData' in result2 },
    scorerRan: received.length > 0,
    savedScores: norm(await listScores(storage2, 'run-agent-2')),
  };

  // Scenario 3: rate 0.5 over several run ids; the scorer runs iff hash(runId) < 0.5.
  const ratioRuns = [];
  const storage3 = new InMemoryStore();
  const calls3 = [];
  const agent3 = new Agent({
    id: 'ratio-agent',
    name: 'Ratio Agent',
    instructions: 'You answer briefly.',
    model: scriptedAgentModel([{ text: 'Hello.' }], calls3),
    scorers: { fixed: { scorer: fixed, sampling: { type: 'ratio', rate: 0.5 } } },
  });
  const mastra3 = new Mastra({ agents: { ratioAgent: agent3 }, storage: storage3, logger: false });
  for (const id of SAMPLING_IDS.slice(0, 10)) {
    received.length = 0;
    await muted(() => mastra3.getAgent('ratioAgent').generate('Hi', { runId: id }));
    const expected = hashToUnitInterval(id) < 0.5;
    const saved = await waitFor(async () => (await listScores(storage3, id)).length > 0, expected ? 3000 : 300);
    if (saved !== expected) throw new Error(`agent-level sampling for ${id}: saved=${saved}, hash says ${expected}`);
    ratioRuns.push({ runId: id, unit: hashToUnitInterval(id), scored: saved });
  }

  // Scenario 5: a standalone agent (no Mastra of its own) while the Mastra instances
  // above exist. Its hook payload has no owner, so every Mastra's hook takes it,
  // finds the scorer id in its registry (a Mastra registers its agents' scorers), runs it, and saves it.
  received.length = 0;
  const agent5 = new Agent({
    id: 'standalone-agent',
    name: 'Standalone Agent',
    instructions: 'You answer briefly.',
    model: scriptedAgentModel([{ text: 'Hello.' }], []),
    scorers: { fixed: { scorer: fixed } },
  });
  await muted(() => agent5.generate('Hi', { runId: 'run-agent-5' }));
  const everywhere = async () => {
    for (const st of [storage, storage2, storage3]) if ((await listScores(st, 'run-agent-5')).length === 0) return false;
    return true;
  };
  await waitFor(everywhere, 3000);
  await new Promise(resolve => setTimeout(resolve, 100));
  const savedIn = {};
  for (const [label, st] of [
    ['scenario withScorers storage', storage],
    ['scenario rateZero storage', storage2],
    ['scenario rateHalf storage', storage3],
  ]) {
    savedIn[label] = (await listScores(st, 'run-agent-5')).map(row => ({ scorerId: row.scorerId, entityId: row.entityId, score: row.score }));
  }
  const scenario5 = {
    agent: 'new Agent({ id: "standalone-agent", ..., scorers: { fixed: { scorer: <the fixed scorer> } } }), not registered with any Mastra',
    call: "agent.generate('Hi', { runId: 'run-agent-5' }) while the three Mastra instances above exist",
    scorerRuns: received.length,
    savedIn,
  };

  return {
    withScorers: scenario1,
    rateZero: scenario2,
    rateHalf: { agent: "scorers: { fixed: { scorer: <the fixed scorer>, sampling: { type: 'ratio', rate: 0.5 } } }", runs: ratioRuns },
    standalone: standalone,
    standaloneWithOtherMastras: scenario5,
  };
}

// ---------------------------------------------------------------------------

const sampling = await recordSampling();
const textCases = caseTable(textCaseDefs);
const toolCases = caseTable(toolCaseDefs);
const code = await recordCode();
const checks = await recordChecks();
const trajectory = await recordTrajectory();
const judged = await recordJudged();
const agent = await recordAgent();

writeFixture('scorers.json', {
  about:
    'Recorded by tests/reference/record/scorers.mjs against @mastra/evals ' +
    EXPECTED_EVALS_VERSION +
    ' and @mastra/core ' +
    version +
    ' (rerun: see tests/reference/record/README.md). ' +
    'Every scorer is called as scorer.run({ input, output }) with input = { inputMessages, rememberedMessages, systemMessages, taggedSystemMessages } and output = the response messages, the shapes the agent hook passes (see agent.withScorers.result.scoringData). ' +
    'code/checks/trajectory variants name the factory options and list cases by name: textCases and toolCases hold those inputs and outputs (trajectory.cases the Trajectory outputs). ' +
    'A case has result (what run() returned; the run input/output objects nested in it, such as a trajectory scorer actualTrajectory, are written "<run.input>"/"<run.output>") or error (the thrown error; a ScorerRunError carries failedStep, completedSteps, cause and the partial result). ' +
    'run() returns { ...run, runId, score, reason, preprocessStepResult, analyzeStepResult, *Prompt, judge }: the echoed run fields (input, output, ...) and the random runId are left out; undefined fields are absent. ' +
    'judged.* cases are complete: options, input, output, the scripted judge answers used (answers: { json } sent as JSON text, or { text } verbatim), every judge model call (calls[].options are the LanguageModelV2 call options minus abortSignal/headers; a system message equal to the group\'s instructions is written "<instructions>"), and result or error; in result/error a string equal to the step prompt sent in calls[i] (the text of its user message) is written "<prompt of calls[i]>". ' +
    'Dates and time-valued keys are "<time>", UUIDs "<id>", judge durationMs "<ms>"; a Set is { "Set": [...] } (JSON.stringify would write {}), a non-finite number { "number": "NaN" }.',
  versions: {
    '@mastra/core': version,
    '@mastra/evals': EXPECTED_EVALS_VERSION,
    compromise: dependencyVersion('compromise'),
    'keyword-extractor': dependencyVersion('keyword-extractor'),
    sentiment: dependencyVersion('sentiment'),
    'string-similarity': dependencyVersion('string-similarity'),
  },
  textCases,
  toolCases,
  code,
  checks,
  trajectory,
  judged,
  agent,
  sampling,
});
