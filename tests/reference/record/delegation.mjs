// Records tests/reference/delegation.json: a supervisor Agent that delegates to
// sub-agents (`agents: { key: subAgent }`, each exposed to the model as a tool
// named `agent-{key}`), run through @mastra/core with scripted LanguageModelV2
// mocks. See README.md for how to run it.
//
// Every agent gets its own mock model; all mocks append to one shared call log,
// so `calls` shows the supervisor's and the sub-agents' model calls in the order
// they happened, each with the full prompt and the tools exactly as the model
// received them.

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { baseDir, coreVersion, importCore, writeFixture } from './lib.mjs';

const version = coreVersion();
const { Agent } = await importCore('agent');
const { createTool } = await importCore('tools');
const { InMemoryStore } = await importCore('storage');
const requireFromBase = createRequire(path.join(baseDir, 'package.json'));
const zodModule = await import(pathToFileURL(requireFromBase.resolve('zod')).href);
const z = zodModule.z ?? zodModule.default?.z ?? zodModule.default;

// Scenarios A and D3 give the supervisor a Memory from @mastra/memory (the
// release whose peer range accepts core 1.71.0) over core's InMemoryStore.
const EXPECTED_MEMORY_VERSION = '1.31.0';
async function importMemory() {
  let pkgFile;
  try {
    pkgFile = requireFromBase.resolve('@mastra/memory/package.json');
  } catch {
    throw new Error(`@mastra/memory not found under ${baseDir}; run "npm install @mastra/memory@${EXPECTED_MEMORY_VERSION}" there`);
  }
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'));
  if (pkg.version !== EXPECTED_MEMORY_VERSION) {
    throw new Error(`expected @mastra/memory ${EXPECTED_MEMORY_VERSION}, found ${pkg.version} in ${path.dirname(pkgFile)}`);
  }
  const entry = pkg.exports['.'].import.default;
  const mod = await import(pathToFileURL(path.join(path.dirname(pkgFile), entry)).href);
  return { Memory: mod.Memory, version: pkg.version };
}
const { Memory, version: memoryVersion } = await importMemory();

const USAGE = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };

// ---------------------------------------------------------------------------
// Normalization. Like lib.mjs's scrub(), but ids are kept unless they are (or
// contain) a UUID: sub-agent thread ids embed one ("th-a-<uuid>"), and the
// resource ids ("user-1-researcher", "boss-researcher") are part of what is
// recorded. Dates and time-valued keys become "<time>", UUIDs "<id>".

const UUID_IN_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const TIME_KEYS = new Set(['createdAt', 'timestamp', 'startedAt', 'endedAt', 'completedAt', 'updatedAt']);

function norm(value, key) {
  if (value === undefined || typeof value === 'function') return undefined;
  if (value instanceof Date) return '<time>';
  if (key && TIME_KEYS.has(key) && (typeof value === 'number' || typeof value === 'string')) return '<time>';
  if (typeof value === 'string') return value.replace(UUID_IN_TEXT, '<id>');
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(v => norm(v) ?? null);
  if (value instanceof Map) return norm(Object.fromEntries(value), key);
  if (value instanceof Error) return errorView(value);
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    const n = norm(v, k);
    if (n !== undefined) out[k] = n;
  }
  return out;
}

function errorView(err) {
  if (!(err instanceof Error)) return { thrown: norm(String(err)) };
  return {
    name: err.constructor?.name ?? err.name,
    message: norm(err.message),
    ...(err.id ? { id: err.id } : {}),
    ...(err.details ? { details: norm(err.details) } : {}),
    ...(err.cause instanceof Error ? { cause: { name: err.cause.constructor?.name, message: norm(err.cause.message) } } : {}),
  };
}

// ---------------------------------------------------------------------------
// The scripted model (as in processor_scenarios.mjs, plus a model label, the
// full tool list, and replies that throw).

/**
 * A LanguageModelV2 named `label` that answers call i with replies[i] (the last
 * reply repeats). A reply is { text?, toolCalls?: [{ id, name, args }], throw? }.
 */
function scriptedModel(label, replies, calls) {
  let index = 0;
  const next = (method, options) => {
    const reply = replies[Math.min(index, replies.length - 1)];
    calls.push({
      model: label,
      method,
      prompt: norm(options.prompt),
      tools: norm(options.tools ?? []),
      ...(options.toolChoice ? { toolChoice: options.toolChoice } : {}),
    });
    index++;
    if (reply.throw) throw new Error(reply.throw);
    return { reply, n: index };
  };
  const finishReason = reply => (reply.toolCalls?.length ? 'tool-calls' : 'stop');
  return {
    specificationVersion: 'v2',
    provider: 'mock',
    modelId: `mock-${label}`,
    supportedUrls: {},
    async doGenerate(options) {
      const { reply, n } = next('doGenerate', options);
      const content = [];
      if (reply.text !== undefined) content.push({ type: 'text', text: reply.text });
      for (const call of reply.toolCalls ?? []) {
        content.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input: JSON.stringify(call.args) });
      }
      return {
        content,
        finishReason: finishReason(reply),
        usage: USAGE,
        warnings: [],
        response: { id: `${label}-resp-${n}`, modelId: `mock-${label}`, timestamp: new Date(0) },
      };
    },
    async doStream(options) {
      const { reply, n } = next('doStream', options);
      const parts = [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', id: `${label}-resp-${n}`, modelId: `mock-${label}`, timestamp: new Date(0) },
      ];
      if (reply.text !== undefined) {
        parts.push({ type: 'text-start', id: `${label}-text-${n}` });
        parts.push({ type: 'text-delta', id: `${label}-text-${n}`, delta: reply.text });
        parts.push({ type: 'text-end', id: `${label}-text-${n}` });
      }
      for (const call of reply.toolCalls ?? []) {
        const input = JSON.stringify(call.args);
        parts.push({ type: 'tool-input-start', id: call.id, toolName: call.name });
        parts.push({ type: 'tool-input-delta', id: call.id, delta: input });
        parts.push({ type: 'tool-input-end', id: call.id });
        parts.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input });
      }
      parts.push({ type: 'finish', finishReason: finishReason(reply), usage: USAGE });
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
}

// ---------------------------------------------------------------------------
// Scenarios. Each builds fresh agents (and memory) from its scripts.

const BOSS_INSTRUCTIONS = 'You coordinate specialists.';
const RESEARCHER_INSTRUCTIONS = 'You research things.';
const USER_INPUT = 'Ask the researcher about the sky';
const DELEGATE = (args, id = 'call-boss-1') => ({ toolCalls: [{ id, name: 'agent-researcher', args }] });
const SKY = { prompt: 'Why is the sky blue?' };

const lookupTool = () =>
  createTool({
    id: 'lookup',
    description: 'Look a fact up.',
    inputSchema: z.object({ q: z.string() }),
    execute: async () => ({ answer: 42 }),
  });

/**
 * Build the agents of a scenario. `spec` = { boss, researcher, checker? } scripts
 * and options; returns { boss, memory? }.
 */
function buildAgents(spec, calls, withMemory) {
  const memory = withMemory ? new Memory({ storage: new InMemoryStore() }) : undefined;
  let checker;
  if (spec.checker) {
    checker = new Agent({
      id: 'checker',
      name: 'Checker',
      description: 'Checks answers.',
      instructions: 'You check answers.',
      model: scriptedModel('checker', spec.checker, calls),
    });
  }
  const researcher = new Agent({
    id: 'researcher',
    name: 'Researcher',
    ...(spec.researcherDescription === null ? {} : { description: spec.researcherDescription ?? 'Researches questions.' }),
    instructions: RESEARCHER_INSTRUCTIONS,
    model: scriptedModel('researcher', spec.researcher, calls),
    ...(spec.researcherTools ? { tools: spec.researcherTools() } : {}),
    ...(checker ? { agents: { checker } } : {}),
  });
  const boss = new Agent({
    id: 'boss',
    name: 'Boss',
    instructions: BOSS_INSTRUCTIONS,
    model: scriptedModel('boss', spec.boss, calls),
    agents: { researcher },
    ...(memory ? { memory } : {}),
    ...(spec.bossConfig ? spec.bossConfig() : {}),
  });
  return { boss, memory };
}

/** What the hooks receive, without the functions and the request context. */
const startContextView = ctx => ({
  primitiveId: ctx.primitiveId,
  primitiveType: ctx.primitiveType,
  prompt: ctx.prompt,
  params: norm(ctx.params),
  iteration: ctx.iteration,
  threadId: norm(ctx.threadId) ?? null,
  resourceId: norm(ctx.resourceId) ?? null,
  parentAgentId: ctx.parentAgentId,
  parentAgentName: ctx.parentAgentName,
  toolCallId: ctx.toolCallId,
  messages: norm(ctx.messages),
});

const completeContextView = ctx => ({
  primitiveId: ctx.primitiveId,
  primitiveType: ctx.primitiveType,
  prompt: ctx.prompt,
  result: norm(ctx.result),
  success: ctx.success,
  ...(ctx.error ? { error: errorView(ctx.error) } : {}),
  iteration: ctx.iteration,
  toolCallId: ctx.toolCallId,
  parentAgentId: ctx.parentAgentId,
  parentAgentName: ctx.parentAgentName,
  messages: norm(ctx.messages),
});

const scenarios = [
  {
    name: 'A. basic delegation, with memory (thread th-a, resource user-1)',
    memory: { thread: 'th-a', resource: 'user-1' },
    stream: true,
    boss: [DELEGATE(SKY), { text: 'It is Rayleigh scattering.' }],
    researcher: [{ text: 'Rayleigh scattering.' }],
  },
  {
    name: 'A0. basic delegation, no memory',
    boss: [DELEGATE(SKY), { text: 'It is Rayleigh scattering.' }],
    researcher: [{ text: 'Rayleigh scattering.' }],
  },
  {
    name: 'B. sub-agent without description; model passes instructions and maxSteps',
    researcherDescription: null,
    boss: [DELEGATE({ ...SKY, instructions: 'Be brief.', maxSteps: 4 }), { text: 'It is Rayleigh scattering.' }],
    researcher: [{ text: 'Rayleigh scattering.' }],
  },
  {
    name: 'C. sub-agent with its own tool',
    researcherTools: () => ({ lookup: lookupTool() }),
    boss: [DELEGATE(SKY), { text: 'It is 42.' }],
    researcher: [{ toolCalls: [{ id: 'call-res-1', name: 'lookup', args: { q: 'sky' } }] }, { text: 'Found it.' }],
  },
  {
    name: 'D. onDelegationStart rejects (delegation passed as a generate() option)',
    delegation: 'onDelegationStart records its ctx and returns { proceed: false, rejectionReason: "Not allowed now" }',
    options: probe => ({
      delegation: {
        onDelegationStart: ctx => {
          probe.onDelegationStart = startContextView(ctx);
          return { proceed: false, rejectionReason: 'Not allowed now' };
        },
      },
    }),
    boss: [DELEGATE(SKY), { text: 'The researcher is not available.' }],
    researcher: [{ text: 'never called' }],
  },
  {
    name: 'D2. onDelegationStart rejects without a reason',
    delegation: 'onDelegationStart returns { proceed: false }',
    options: () => ({ delegation: { onDelegationStart: () => ({ proceed: false }) } }),
    boss: [DELEGATE(SKY), { text: 'The researcher is not available.' }],
    researcher: [{ text: 'never called' }],
  },
  {
    name: 'D3. onDelegationStart rejects, with memory (thread th-d, resource user-1)',
    delegation: 'onDelegationStart records its ctx and returns { proceed: false, rejectionReason: "Not allowed now" }',
    memory: { thread: 'th-d', resource: 'user-1' },
    options: probe => ({
      delegation: {
        onDelegationStart: ctx => {
          probe.onDelegationStart = startContextView(ctx);
          return { proceed: false, rejectionReason: 'Not allowed now' };
        },
      },
    }),
    boss: [DELEGATE(SKY), { text: 'The researcher is not available.' }],
    researcher: [{ text: 'never called' }],
  },
  {
    name: 'D4. delegation given to the Agent constructor (not an AgentConfig field: ignored)',
    bossConfig: () => ({ delegation: { onDelegationStart: () => ({ proceed: false, rejectionReason: 'Not allowed now' }) } }),
    bossConfigText: 'new Agent({ ..., delegation: { onDelegationStart: () => ({ proceed: false, rejectionReason: "Not allowed now" }) } })',
    boss: [DELEGATE(SKY), { text: 'It is Rayleigh scattering.' }],
    researcher: [{ text: 'Rayleigh scattering.' }],
  },
  {
    name: 'D5. delegation given as the Agent defaultOptions.delegation',
    bossConfig: () => ({ defaultOptions: { delegation: { onDelegationStart: () => ({ proceed: false, rejectionReason: 'Not allowed now' }) } } }),
    bossConfigText: 'new Agent({ ..., defaultOptions: { delegation: { onDelegationStart: () => ({ proceed: false, rejectionReason: "Not allowed now" }) } } })',
    boss: [DELEGATE(SKY), { text: 'The researcher is not available.' }],
    researcher: [{ text: 'never called' }],
  },
  {
    name: 'E1. onDelegationComplete replaces the result text',
    delegation: 'onDelegationComplete records its ctx and returns { resultText: "REPLACED TEXT" }',
    options: probe => ({
      delegation: {
        onDelegationComplete: ctx => {
          probe.onDelegationComplete = completeContextView(ctx);
          return { resultText: 'REPLACED TEXT' };
        },
      },
    }),
    boss: [DELEGATE(SKY), { text: 'Done.' }],
    researcher: [{ text: 'Rayleigh scattering.' }],
  },
  {
    name: 'E2. messageFilter keeps only the last context message',
    delegation: 'messageFilter records its ctx and returns ctx.messages.slice(-1)',
    options: probe => ({
      delegation: {
        messageFilter: ctx => {
          probe.messageFilter = {
            messages: norm(ctx.messages),
            primitiveId: ctx.primitiveId,
            primitiveType: ctx.primitiveType,
            prompt: ctx.prompt,
            iteration: ctx.iteration,
            toolCallId: ctx.toolCallId,
            parentAgentId: ctx.parentAgentId,
            parentAgentName: ctx.parentAgentName,
          };
          return ctx.messages.slice(-1);
        },
      },
    }),
    boss: [DELEGATE(SKY), { text: 'Done.' }],
    researcher: [{ text: 'Rayleigh scattering.' }],
  },
  {
    name: 'F. the sub-agent model throws',
    boss: [DELEGATE(SKY), { text: 'The researcher failed.' }],
    researcher: [{ throw: 'boom' }],
  },
  {
    name: 'F2. the sub-agent model throws; onDelegationComplete observes the failure',
    delegation: 'onDelegationComplete records its ctx and returns nothing',
    options: probe => ({
      delegation: {
        onDelegationComplete: ctx => {
          probe.onDelegationComplete = completeContextView(ctx);
        },
      },
    }),
    boss: [DELEGATE(SKY), { text: 'The researcher failed.' }],
    researcher: [{ throw: 'boom' }],
  },
  {
    name: 'F3. the sub-agent model throws; onDelegationComplete returns resultText',
    delegation: 'onDelegationComplete returns { resultText: "REPLACED FAILURE" }',
    options: () => ({ delegation: { onDelegationComplete: () => ({ resultText: 'REPLACED FAILURE' }) } }),
    boss: [DELEGATE(SKY), { text: 'The researcher failed.' }],
    researcher: [{ throw: 'boom' }],
  },
  {
    name: 'G. two levels: boss -> researcher -> checker',
    boss: [DELEGATE(SKY), { text: 'It is Rayleigh scattering.' }],
    researcher: [
      { toolCalls: [{ id: 'call-res-1', name: 'agent-checker', args: { prompt: 'Check: Rayleigh scattering.' } }] },
      { text: 'Rayleigh scattering (checked).' },
    ],
    checker: [{ text: 'Correct.' }],
  },
];

// ---------------------------------------------------------------------------

function stepView(step) {
  const out = { finishReason: step.finishReason, text: step.text };
  if (step.toolCalls?.length) out.toolCalls = step.toolCalls.map(c => norm(c.payload ?? c));
  if (step.toolResults?.length) out.toolResults = step.toolResults.map(r => norm(r.payload ?? r));
  // A failed tool is not in toolResults; it shows in the step content.
  const failed = (step.content ?? []).filter(p => p.type === 'tool-error' || String(p.output?.type ?? '').startsWith('error'));
  if (failed.length) out.failedToolParts = norm(failed);
  return out;
}

/** Memory contents in a normalized form: threads of a resource and their messages (role + content parts). */
async function dumpMemory(memory, resourceId) {
  const { threads } = await memory.listThreads({ filter: { resourceId }, perPage: false });
  const out = [];
  for (const thread of threads) {
    const { messages } = await memory.recall({ threadId: thread.id, resourceId, perPage: false });
    out.push({
      threadId: norm(thread.id),
      resourceId: thread.resourceId,
      ...(thread.title !== undefined ? { title: norm(thread.title) } : {}),
      messages: messages.map(m => ({
        role: m.role,
        ...(m.type ? { type: m.type } : {}),
        threadId: norm(m.threadId),
        resourceId: m.resourceId,
        parts: norm(m.content?.parts),
        ...(m.content?.metadata ? { metadata: norm(m.content.metadata) } : {}),
      })),
    });
  }
  return out;
}

async function memoryView(memory, scenario) {
  if (!memory) return undefined;
  return {
    [scenario.memory.resource]: await dumpMemory(memory, scenario.memory.resource),
    [`${scenario.memory.resource}-researcher`]: await dumpMemory(memory, `${scenario.memory.resource}-researcher`),
  };
}

function runOptions(scenario, probe) {
  return {
    ...(scenario.options ? scenario.options(probe) : {}),
    ...(scenario.memory ? { memory: { thread: scenario.memory.thread, resource: scenario.memory.resource } } : {}),
  };
}

async function runGenerate(scenario) {
  const calls = [];
  const probe = {};
  const { boss, memory } = buildAgents(scenario, calls, !!scenario.memory);
  let result;
  try {
    result = await boss.generate(USER_INPUT, runOptions(scenario, probe));
  } catch (err) {
    return { thrown: { name: err?.constructor?.name, message: String(err?.message ?? err) }, calls };
  }
  return {
    calls,
    result: {
      text: result.text,
      finishReason: result.finishReason,
      toolCalls: (result.toolCalls ?? []).map(c => norm(c.payload ?? c)),
      toolResults: (result.toolResults ?? []).map(r => norm(r.payload ?? r)),
      steps: (result.steps ?? []).map(stepView),
      responseMessages: norm(result.response?.messages ?? []),
      ...(result.error ? { error: String(result.error?.message ?? result.error) } : {}),
    },
    ...(Object.keys(probe).length ? { hooks: probe } : {}),
    ...(memory ? { savedMemory: await memoryView(memory, scenario) } : {}),
  };
}

function chunkView(chunk) {
  const out = { type: chunk.type };
  if (chunk.from) out.from = chunk.from;
  if (chunk.type === 'tool-output') {
    const inner = chunk.payload?.output;
    out.toolName = chunk.payload?.toolName;
    out.toolCallId = chunk.payload?.toolCallId;
    out.output = { type: inner?.type, ...(inner?.from ? { from: inner.from } : {}) };
    if (inner?.type === 'text-delta') out.output.text = inner.payload?.text;
  } else if (chunk.type === 'text-delta') out.text = chunk.payload?.text;
  else if (chunk.type === 'tool-call' || chunk.type === 'tool-result') out.payload = norm(chunk.payload);
  return out;
}

async function runStream(scenario) {
  const calls = [];
  const probe = {};
  const { boss, memory } = buildAgents(scenario, calls, !!scenario.memory);
  const chunks = [];
  let output;
  try {
    output = await boss.stream(USER_INPUT, runOptions(scenario, probe));
    for await (const chunk of output.fullStream) chunks.push(chunkView(chunk));
  } catch (err) {
    return { thrown: { name: err?.constructor?.name, message: String(err?.message ?? err) }, calls, chunks };
  }
  const steps = await output.steps;
  return {
    calls,
    chunks,
    result: {
      text: await output.text,
      finishReason: await output.finishReason,
      toolCalls: ((await output.toolCalls) ?? []).map(c => norm(c.payload ?? c)),
      toolResults: ((await output.toolResults) ?? []).map(r => norm(r.payload ?? r)),
      steps: steps.map(stepView),
      responseMessages: norm((await output.response)?.messages ?? []),
    },
    ...(memory ? { savedMemory: await memoryView(memory, scenario) } : {}),
  };
}

/** The agents of a scenario, as configured. */
function agentsView(scenario) {
  const researcher = {
    id: 'researcher',
    name: 'Researcher',
    ...(scenario.researcherDescription === null ? {} : { description: 'Researches questions.' }),
    instructions: RESEARCHER_INSTRUCTIONS,
    ...(scenario.researcherTools ? { tools: ['lookup: createTool, input { q: string }, returns { answer: 42 }'] } : {}),
    ...(scenario.checker ? { agents: { checker: { id: 'checker', name: 'Checker', description: 'Checks answers.', instructions: 'You check answers.' } } } : {}),
  };
  return {
    boss: {
      id: 'boss',
      name: 'Boss',
      instructions: BOSS_INSTRUCTIONS,
      ...(scenario.memory ? { memory: 'new Memory({ storage: new InMemoryStore() })' } : {}),
      ...(scenario.bossConfigText ? { config: scenario.bossConfigText } : {}),
    },
    researcher,
  };
}

// The loop logs errors on stderr; keep the recorder's output readable.
const quiet = ['log', 'info', 'warn', 'error', 'debug'].map(k => [k, console[k]]);
const mute = () => quiet.forEach(([k]) => (console[k] = () => {}));
const unmute = () => quiet.forEach(([k, f]) => (console[k] = f));

const records = [];
for (const scenario of scenarios) {
  mute();
  let generate, stream;
  try {
    generate = await runGenerate(scenario);
    if (scenario.stream) stream = await runStream(scenario);
  } finally {
    unmute();
  }
  records.push({
    name: scenario.name,
    agents: agentsView(scenario),
    input: USER_INPUT,
    ...(scenario.memory || scenario.delegation
      ? {
          generateOptions: {
            ...(scenario.memory ? { memory: scenario.memory } : {}),
            ...(scenario.delegation ? { delegation: scenario.delegation } : {}),
          },
        }
      : {}),
    scripts: {
      boss: scenario.boss,
      researcher: scenario.researcher,
      ...(scenario.checker ? { checker: scenario.checker } : {}),
    },
    generate,
    ...(stream ? { stream } : {}),
  });
  console.log(`recorded ${scenario.name}`);
}

writeFixture('delegation.json', {
  about:
    'Recorded by tests/reference/record/delegation.mjs against @mastra/core ' +
    version +
    ' and @mastra/memory ' +
    memoryVersion +
    ' (rerun: see tests/reference/record/README.md). A supervisor Agent "boss" with agents: { researcher } (so the tool agent-researcher) runs generate() ' +
    '(model doGenerate; scenario A also stream(), model doStream) against scripted LanguageModelV2 mocks, one per agent (scripts.*: one reply per model call, the last repeating; ' +
    '{ throw } makes the call throw). calls[] are all model calls of the run in order, with the model label, the full prompt and the tools exactly as the model received them. ' +
    'result.toolResults/steps carry the full tool-result objects; a failed tool call shows only in steps[].failedToolParts (step content). ' +
    'savedMemory lists the threads and messages saved for resource user-1 (supervisor) and user-1-researcher (sub-agent). hooks are the delegation hook contexts as received. ' +
    'Dates and time-valued keys are "<time>", UUIDs (also inside strings such as sub-agent thread ids) are "<id>"; stream.chunks keep only chunk types, the inner type of tool-output chunks, text, and the tool-call/tool-result payloads.',
  mastraCoreVersion: version,
  mastraMemoryVersion: memoryVersion,
  usage: USAGE,
  scenarios: records,
});
