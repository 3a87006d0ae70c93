// Records tests/reference/processor_scenarios.json: full Agent.generate() and
// Agent.stream() runs of @mastra/core with inline processors against a scripted
// LanguageModelV2 mock. See README.md for how to run it.
//
// generate() calls the model's doGenerate and stream() calls doStream; both
// replay the same script (one reply per call) and record every call's prompt.

import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { baseDir, coreVersion, importCore, scrub, writeFixture } from './lib.mjs';

const version = coreVersion();
const { Agent } = await importCore('agent');
const { createTool } = await importCore('tools');
const { RegexFilterProcessor, TokenLimiterProcessor } = await importCore('processors');
const zodModule = await import(pathToFileURL(createRequire(path.join(baseDir, 'package.json')).resolve('zod')).href);
const z = zodModule.z ?? zodModule.default?.z ?? zodModule.default;

const USAGE = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };

/**
 * A LanguageModelV2 that answers call i with replies[i] (the last reply repeats
 * if the script runs out). A reply is { text?, deltas?, toolCalls?: [{ id, name, args }] }.
 */
function scriptedModel(replies, calls) {
  let index = 0;
  const next = (method, options) => {
    const reply = replies[Math.min(index, replies.length - 1)];
    calls.push({
      method,
      prompt: scrub(options.prompt),
      tools: (options.tools ?? []).map(t => t.name),
      ...(options.toolChoice ? { toolChoice: options.toolChoice } : {}),
    });
    index++;
    return { reply, n: index };
  };
  const finishReason = reply => (reply.toolCalls?.length ? 'tool-calls' : 'stop');
  return {
    specificationVersion: 'v2',
    provider: 'mock',
    modelId: 'mock',
    supportedUrls: {},
    async doGenerate(options) {
      const { reply, n } = next('doGenerate', options);
      const content = [];
      if (reply.text !== undefined) content.push({ type: 'text', text: reply.deltas ? reply.deltas.join('') : reply.text });
      for (const call of reply.toolCalls ?? []) {
        content.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input: JSON.stringify(call.args) });
      }
      return {
        content,
        finishReason: finishReason(reply),
        usage: USAGE,
        warnings: [],
        response: { id: `resp-${n}`, modelId: 'mock', timestamp: new Date(0) },
      };
    },
    async doStream(options) {
      const { reply, n } = next('doStream', options);
      const parts = [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', id: `resp-${n}`, modelId: 'mock', timestamp: new Date(0) },
      ];
      if (reply.text !== undefined) {
        parts.push({ type: 'text-start', id: `text-${n}` });
        for (const delta of reply.deltas ?? [reply.text]) parts.push({ type: 'text-delta', id: `text-${n}`, delta });
        parts.push({ type: 'text-end', id: `text-${n}` });
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
// Scenarios. `setup()` returns fresh processors/tools (and a probe of side
// effects) for each run, so generate() and stream() start from the same state.

const echoTool = probe =>
  createTool({
    id: 'echo',
    description: 'Echo the given text back.',
    inputSchema: z.object({ text: z.string() }),
    execute: async input => {
      const args = input?.context && typeof input.context === 'object' && !('text' in input) ? input.context : input;
      probe.toolRuns.push(scrub(args));
      return { echoed: args.text };
    },
  });

const scenarios = [
  {
    name: 'a. processOutputStep abort without retry',
    replies: [{ text: 'First answer.' }, { text: 'Second answer.' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'step-guard',
          processOutputStep({ abort }) {
            abort('Not allowed', { metadata: { k: 1 } });
          },
        },
      ],
    }),
  },
  {
    name: 'b. processOutputStep retry once, maxProcessorRetries 2',
    agent: { maxProcessorRetries: 2 },
    replies: [{ text: 'bad' }, { text: 'good' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'step-guard',
          processOutputStep({ text, abort }) {
            if (text === 'bad') abort('Try again', { retry: true });
          },
        },
      ],
    }),
  },
  {
    name: 'c. processOutputStep retry once, maxProcessorRetries unset',
    replies: [{ text: 'bad' }, { text: 'good' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'step-guard',
          processOutputStep({ text, abort }) {
            if (text === 'bad') abort('Try again', { retry: true });
          },
        },
      ],
    }),
  },
  {
    name: 'd. processOutputStep retry always, maxProcessorRetries 1 (exhausted)',
    agent: { maxProcessorRetries: 1 },
    replies: [{ text: 'bad one' }, { text: 'bad two' }, { text: 'bad three' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'step-guard',
          processOutputStep({ abort }) {
            abort('Still wrong', { retry: true, metadata: { attempt: 'any' } });
          },
        },
      ],
    }),
  },
  {
    name: 'e. retries with reasons A, A, B then accepted, maxProcessorRetries 5',
    agent: { maxProcessorRetries: 5 },
    replies: [{ text: 'try 1' }, { text: 'try 2' }, { text: 'try 3' }, { text: 'try 4' }],
    setup: () => {
      let n = 0;
      const seen = [];
      return {
        probe: { seen },
        outputProcessors: [
          {
            id: 'step-guard',
            processOutputStep({ abort, retryCount, stepNumber, text }) {
              seen.push({ stepNumber, retryCount, text });
              const reasons = ['A', 'A', 'B'];
              if (n < reasons.length) abort(reasons[n++], { retry: true });
            },
          },
        ],
      };
    },
  },
  {
    name: 'f. processInput abort',
    replies: [{ text: 'never sent' }],
    setup: () => ({
      inputProcessors: [
        {
          id: 'input-guard',
          processInput({ abort }) {
            abort('Blocked input');
          },
        },
      ],
    }),
  },
  {
    name: 'g. processOutputStream abort on "forbidden"',
    replies: [{ text: 'This is forbidden text.', deltas: ['This is ', 'forbidden', ' text.'] }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'stream-guard',
          processOutputStream({ part, abort }) {
            if (part.type === 'text-delta' && part.payload.text.includes('forbidden')) {
              abort('Forbidden word', { metadata: { word: 'forbidden' } });
            }
            return part;
          },
        },
      ],
    }),
  },
  {
    name: 'h. processOutputResult rewrites the text',
    replies: [{ text: 'original answer' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'result-rewriter',
          processOutputResult({ messages }) {
            return messages.map(m =>
              m.role !== 'assistant'
                ? m
                : {
                    ...m,
                    content: {
                      ...m.content,
                      parts: m.content.parts.map(p => (p.type === 'text' ? { ...p, text: `REWRITTEN: ${p.text.toUpperCase()}` } : p)),
                    },
                  },
            );
          },
        },
      ],
    }),
  },
  {
    name: 'i. processOutputStream rewrites text-delta text',
    replies: [{ text: 'Well darn, that darn thing.', deltas: ['Well darn, ', 'that darn', ' thing.'] }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'stream-rewriter',
          processOutputStream({ part }) {
            if (part.type === 'text-delta') return { ...part, payload: { ...part.payload, text: part.payload.text.replace(/darn/g, '***') } };
            return part;
          },
        },
      ],
    }),
  },
  {
    name: 'j. tool-call step retried once by processOutputStep, maxProcessorRetries 2',
    agent: { maxProcessorRetries: 2 },
    replies: [
      { toolCalls: [{ id: 'call-1', name: 'echo', args: { text: 'first' } }] },
      { toolCalls: [{ id: 'call-2', name: 'echo', args: { text: 'second' } }] },
      { text: 'Echoed.' },
    ],
    setup: () => {
      const probe = { toolRuns: [], seen: [] };
      let rejected = false;
      return {
        probe,
        tools: { echo: echoTool(probe) },
        outputProcessors: [
          {
            id: 'step-guard',
            processOutputStep({ abort, toolCalls, stepNumber, retryCount, finishReason }) {
              probe.seen.push({ stepNumber, retryCount, finishReason, toolCalls: scrub(toolCalls ?? []) });
              if (toolCalls?.length && !rejected) {
                rejected = true;
                abort('Use a better argument', { retry: true });
              }
            },
          },
        ],
      };
    },
  },
  // Extras beyond the brief, for the built-in processors inside the loop.
  {
    name: 'k. built-in RegexFilterProcessor blocks input (pii)',
    replies: [{ text: 'never sent' }],
    userMessage: 'Hello, mail me at bob@example.com',
    setup: () => ({ inputProcessors: [new RegexFilterProcessor({ presets: ['pii'], strategy: 'block', phase: 'input' })] }),
  },
  {
    name: 'l. built-in RegexFilterProcessor redacts input and output',
    replies: [{ text: 'Sure, call 555-123-4567 or write to help@corp.com.', deltas: ['Sure, call 555-', '123-4567 or write to help@', 'corp.com.'] }],
    userMessage: 'Hello, mail me at bob@example.com',
    setup: () => {
      const p = new RegexFilterProcessor({ presets: ['pii'], strategy: 'redact' });
      return { inputProcessors: [p], outputProcessors: [p] };
    },
  },
  {
    name: 'm. built-in TokenLimiterProcessor output truncate (limit 3)',
    replies: [{ text: 'One two three four five six seven eight nine ten.', deltas: ['One two', ' three four five', ' six seven eight', ' nine ten.'] }],
    setup: () => ({ outputProcessors: [new TokenLimiterProcessor({ limit: 3, strategy: 'truncate' })] }),
  },
  {
    name: 'n. built-in TokenLimiterProcessor output abort (limit 3)',
    replies: [{ text: 'One two three four five six seven eight nine ten.', deltas: ['One two', ' three four five', ' six seven eight', ' nine ten.'] }],
    setup: () => ({ outputProcessors: [new TokenLimiterProcessor({ limit: 3, strategy: 'abort' })] }),
  },
  {
    name: 'o. built-in TokenLimiterProcessor input trims history (limit 60)',
    replies: [{ text: 'ok' }],
    messages: [
      { role: 'user', content: 'An early question that is fairly long and should be dropped by the limiter.' },
      { role: 'assistant', content: 'An early answer that is also fairly long and should be dropped too.' },
      { role: 'user', content: 'Hello' },
    ],
    setup: () => ({ inputProcessors: [new TokenLimiterProcessor({ limit: 60 })] }),
  },
  {
    name: 'p. processOutputStream abort with retry:true, maxProcessorRetries 2',
    agent: { maxProcessorRetries: 2 },
    replies: [{ text: 'forbidden once' }, { text: 'clean answer' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'stream-guard',
          processOutputStream({ part, abort }) {
            if (part.type === 'text-delta' && part.payload.text.includes('forbidden')) abort('No forbidden words', { retry: true });
            return part;
          },
        },
      ],
    }),
  },
  {
    name: 'q. processInput abort with retry:true and metadata, maxProcessorRetries 2',
    agent: { maxProcessorRetries: 2 },
    replies: [{ text: 'never sent' }],
    setup: () => ({
      inputProcessors: [
        {
          id: 'input-guard',
          processInput({ abort }) {
            abort('Blocked input', { retry: true, metadata: { why: 'test' } });
          },
        },
      ],
    }),
  },
  {
    name: 'r. built-in RegexFilterProcessor blocks output (pii, phase output)',
    replies: [{ text: 'Write to help@corp.com today.', deltas: ['Write to ', 'help@corp.com', ' today.'] }],
    setup: () => ({ outputProcessors: [new RegexFilterProcessor({ presets: ['pii'], strategy: 'block', phase: 'output' })] }),
  },
  {
    name: 's. processOutputResult abort',
    replies: [{ text: 'final text' }],
    setup: () => ({
      outputProcessors: [
        {
          id: 'result-guard',
          processOutputResult({ abort }) {
            abort('Result rejected', { metadata: { k: 2 } });
          },
        },
      ],
    }),
  },
];

// ---------------------------------------------------------------------------

function makeAgent(scenario, model) {
  const env = scenario.setup();
  const agent = new Agent({
    id: 'proc-agent',
    name: 'proc-agent',
    instructions: 'You are helpful.',
    model,
    ...(env.tools ? { tools: env.tools } : {}),
    ...(env.inputProcessors ? { inputProcessors: env.inputProcessors } : {}),
    ...(env.outputProcessors ? { outputProcessors: env.outputProcessors } : {}),
    ...(scenario.agent ?? {}),
  });
  return { agent, probe: env.probe };
}

const userInput = scenario => scenario.messages ?? scenario.userMessage ?? 'Hello';

function stepView(step) {
  const out = { finishReason: step.finishReason, text: step.text };
  if (step.tripwire) out.tripwire = scrub(step.tripwire);
  if (step.toolCalls?.length) out.toolCalls = step.toolCalls.map(c => scrub(c.payload ?? c));
  if (step.toolResults?.length) out.toolResults = step.toolResults.map(r => scrub(r.payload ?? r));
  return out;
}

async function settle(promiseLike) {
  try {
    return await promiseLike;
  } catch (err) {
    return { thrown: String(err?.message ?? err) };
  }
}

async function runGenerate(scenario) {
  const calls = [];
  const { agent, probe } = makeAgent(scenario, scriptedModel(scenario.replies, calls));
  let result;
  try {
    result = await agent.generate(userInput(scenario));
  } catch (err) {
    return { thrown: { name: err?.constructor?.name, message: String(err?.message ?? err) }, calls, ...(probe ? { probe: scrub(probe) } : {}) };
  }
  return {
    calls,
    result: {
      text: result.text,
      finishReason: result.finishReason,
      tripwire: scrub(result.tripwire) ?? null,
      steps: (result.steps ?? []).map(stepView),
      usage: scrub(result.usage),
      totalUsage: scrub(result.totalUsage),
      responseMessages: scrub(result.response?.messages ?? []),
      ...(result.error ? { error: String(result.error?.message ?? result.error) } : {}),
    },
    ...(probe ? { probe: scrub(probe) } : {}),
  };
}

const PAYLOAD_TYPES = new Set(['tripwire', 'step-finish', 'finish', 'tool-call', 'tool-result', 'error', 'abort']);

function chunkView(chunk) {
  const out = { type: chunk.type };
  if (chunk.type === 'text-delta') out.text = chunk.payload?.text;
  else if (chunk.type.startsWith('data-')) {
    out.data = scrub(chunk.data);
    if (chunk.transient !== undefined) out.transient = chunk.transient;
  } else if (PAYLOAD_TYPES.has(chunk.type)) {
    const payload = scrub(chunk.payload);
    // step-finish / finish repeat the whole response message list and request
    // body; keep them out of the fixture (the generate() side records them).
    if (payload && typeof payload === 'object') {
      if (payload.messages) payload.messages = '<omitted>';
      if (payload.metadata?.request) payload.metadata.request = '<omitted>';
      if (payload.response?.messages) payload.response.messages = '<omitted>';
    }
    out.payload = payload;
  }
  if (chunk.from && chunk.type !== 'text-delta') out.from = chunk.from;
  return out;
}

async function runStream(scenario) {
  const calls = [];
  const { agent, probe } = makeAgent(scenario, scriptedModel(scenario.replies, calls));
  const chunks = [];
  let output;
  try {
    output = await agent.stream(userInput(scenario));
    for await (const chunk of output.fullStream) chunks.push(chunkView(chunk));
  } catch (err) {
    return { thrown: { name: err?.constructor?.name, message: String(err?.message ?? err) }, calls, chunks };
  }
  const steps = await settle(output.steps);
  return {
    calls,
    chunks,
    result: {
      text: await settle(output.text),
      finishReason: await settle(output.finishReason),
      tripwire: scrub(output.tripwire) ?? null,
      steps: Array.isArray(steps) ? steps.map(stepView) : steps,
    },
    ...(probe ? { probe: scrub(probe) } : {}),
  };
}

// The loop logs tripwires and workflow step errors on stderr; keep the recorder's output readable.
const quiet = ['log', 'info', 'warn', 'error', 'debug'].map(k => [k, console[k]]);
const mute = () => quiet.forEach(([k]) => (console[k] = () => {}));
const unmute = () => quiet.forEach(([k, f]) => (console[k] = f));

const records = [];
for (const scenario of scenarios) {
  mute();
  let generate, stream;
  try {
    generate = await runGenerate(scenario);
    stream = await runStream(scenario);
  } finally {
    unmute();
  }
  records.push({
    name: scenario.name,
    agent: { instructions: 'You are helpful.', ...(scenario.agent ?? {}) },
    input: userInput(scenario),
    replies: scenario.replies,
    generate,
    stream,
  });
  console.log(`recorded ${scenario.name}`);
}

writeFixture('processor_scenarios.json', {
  about:
    'Recorded by tests/reference/record/processor_scenarios.mjs against @mastra/core ' +
    version +
    ': Agent.generate() (model doGenerate) and Agent.stream() (model doStream) with inline processors and a scripted LanguageModelV2 (one reply per model call, the last repeating). ' +
    'calls[] are the exact prompts the model received; ids/timestamps are "<id>"/"<time>". stream.chunks keep the payload only for tripwire/step-finish/finish/tool-call/tool-result/error/abort chunks ' +
    '(text-delta keeps its text; data-* chunks keep data), with messages/request inside them omitted.',
  mastraCoreVersion: version,
  usage: USAGE,
  scenarios: records,
});
