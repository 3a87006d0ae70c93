// Records tests/reference/processors.json: the built-in rule-based processors of
// @mastra/core (UnicodeNormalizer, RegexFilterProcessor, TokenLimiterProcessor)
// and tokenx's estimateTokenCount, run directly with the arguments the agent
// loop passes them. See README.md for how to run it.

import {
  coreVersion,
  describeError,
  importBundledTokenx,
  importCore,
  silentLogger,
  writeFixture,
  dbMessage,
} from './lib.mjs';

const version = coreVersion();
const { UnicodeNormalizer, RegexFilterProcessor, TokenLimiterProcessor, ProcessorRunner } = await importCore('processors');
const { TripWire, MessageList } = await importCore('agent');
const tokenx = await importBundledTokenx();

const plain = v => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

/** The abort the runner hands to processInput / processOutputResult / processLLMRequest. */
function runnerAbort(processor) {
  return (reason, options) => {
    throw new TripWire(reason || `Tripwire triggered by ${processor.id}`, options, processor.id);
  };
}

/** Call a hook; return its value or the TripWire it threw. */
async function capture(fn) {
  try {
    return { ok: await fn() };
  } catch (err) {
    if (!(err instanceof TripWire)) throw err;
    return describeError(err);
  }
}

/** Capture console.warn lines written while fn runs. */
async function withWarnings(fn) {
  const warnings = [];
  const original = console.warn;
  console.warn = (...args) => warnings.push(args.map(String).join(' '));
  try {
    return { value: await fn(), warnings };
  } finally {
    console.warn = original;
  }
}

/** Texts of a MastraDBMessage list: per message, its parts (text, or the part's type) and content.content. */
function messageTexts(messages) {
  return messages.map(m => {
    if (typeof m.content === 'string') return { id: m.id, role: m.role, contentString: m.content };
    const out = { id: m.id, role: m.role };
    if (m.content?.parts) out.parts = m.content.parts.map(p => (p.type === 'text' ? p.text : { type: p.type }));
    if ('content' in (m.content ?? {})) out.content = m.content.content === undefined ? null : m.content.content;
    return out;
  });
}

/**
 * Drive a list of stream chunks through one output processor the way the
 * agent's output stream does (stream/base/output.ts): ProcessorRunner.processPart
 * with a writer whose custom() enqueues into the stream, then drainReprocessParts.
 * A blocked part enqueues a tripwire chunk; later chunks still go through the
 * transform. Each emitted entry says which input chunk produced it.
 */
async function runStream(processor, parts) {
  const runner = new ProcessorRunner({ outputProcessors: [processor], logger: silentLogger, agentName: 'recorder' });
  const states = new Map();
  const emitted = [];
  let current = 0;
  const writer = { custom: async data => emitted.push({ from: current, custom: plain(data) }) };
  const record = (result, reprocessed) => {
    if (result.blocked) {
      emitted.push({
        from: current,
        tripwire: {
          reason: result.reason || 'Output processor blocked content',
          retry: result.tripwireOptions?.retry,
          metadata: plain(result.tripwireOptions?.metadata),
          processorId: result.processorId,
        },
      });
      return false;
    }
    if (result.part != null) emitted.push({ from: current, ...(reprocessed ? { reprocessed: true } : {}), part: chunkView(result.part) });
    return true;
  };
  for (const [index, part] of parts.entries()) {
    current = index;
    const result = await runner.processPart(part, states, undefined, undefined, undefined, 0, writer);
    if (!record(result, false)) continue;
    const again = await runner.drainReprocessParts(states, undefined, undefined, undefined, 0, writer);
    for (const r of again) if (!record(r, true)) break;
  }
  return emitted;
}

function chunkView(part) {
  if (part.type === 'text-delta') return { type: part.type, text: part.payload.text };
  if (part.type === 'object') return { type: part.type, object: plain(part.object) };
  return { type: part.type };
}

const RUN = 'run-1';
const FROM = 'AGENT';
const textStart = () => ({ type: 'text-start', runId: RUN, from: FROM, payload: { id: 't1' } });
const textDelta = text => ({ type: 'text-delta', runId: RUN, from: FROM, payload: { id: 't1', text } });
const textEnd = () => ({ type: 'text-end', runId: RUN, from: FROM, payload: { id: 't1' } });
const finish = () => ({
  type: 'finish',
  runId: RUN,
  from: FROM,
  payload: { stepResult: { reason: 'stop' }, output: { usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } } },
});
const streamOf = deltas => [textStart(), ...deltas.map(textDelta), textEnd(), finish()];
const chunkInput = parts => parts.map(chunkView);

// ---------------------------------------------------------------------------
// UnicodeNormalizer

const unicodeInputs = [
  ['plain ascii', 'Hello, world!'],
  ['fullwidth letters and digits', 'Ｈｅｌｌｏ　ＷＯＲＬＤ　１２３！'],
  ['ligatures', 'ﬁnd the ﬂow ﬀ ﬃ ﬆ'],
  ['superscripts and subscripts', 'x² + y³ = z⁴; H₂O; 2ⁿ'],
  ['compatibility characters', '① ② ⑩ ㎏ ㎞ ™ ℃ ½ Ⅻ ㍻'],
  ['combining acute (decomposed)', 'cafe\u0301 and nai\u0308ve'],
  ['precomposed accents', 'café naïve Ångström'],
  ['hangul jamo sequence', '\u1100\u1161\u11A8'],
  ['crlf line endings', 'line one\r\nline two\r\n\r\nline three'],
  ['lone cr', 'a\rb\r\rc'],
  ['runs of newlines', 'para one\n\n\n\npara two\n\n'],
  ['runs of spaces and tabs', 'a    b\t\tc \t d'],
  ['mixed tabs and newlines', 'a \t\n\t b\n \n c'],
  ['vertical tab and form feed', 'a\u000Bb\u000Cc \u000B d'],
  ['nul and c0 controls', 'a\u0000b\u0001c\u0007d\u001Be\u001Ff'],
  ['del and c1 controls', 'a\u007Fb\u0080c\u0085d\u009Fe'],
  ['tab newline cr with controls', '\u0000\ta\u0008\nb\rc\u0000'],
  ['emoji', 'I ❤️ pizza 🍕 😀'],
  ['zwj family and skin tones', '👨‍👩‍👧‍👦 👍🏽 🧑🏿‍💻'],
  ['flags and keycaps', '🇺🇸 🇯🇵 #️⃣ 1️⃣'],
  ['zero width joiner alone', 'a\u200Db \u200D c\u200C d\u200B e'],
  ['non-bmp letters', '𝐇𝐞𝐥𝐥𝐨 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀 𓀀'],
  ['leading and trailing whitespace', '  \t\n hello \n\t  '],
  ['nbsp and ideographic space', '\u00A0\u3000hello\u00A0\u00A0world\u3000\u00A0'],
  ['other unicode spaces', '\u2002a\u2003\u2009b\u202F\u205Fc\u2007'],
  ['bom and line separators', '\uFEFFhello\u2028world\u2029\uFEFF'],
  ['nel at edges', '\u0085hello\u0085'],
  ['mongolian vowel separator', '\u180Ehello\u180E'],
  ['arabic presentation forms', 'ﻻ ﷺ ﻼ'],
  ['cjk and halfwidth katakana', '日本語 ｶﾀｶﾅ ﾊﾟ'],
  ['greek and cyrillic confusables', 'Ρаypal Αpple'],
  ['only whitespace', ' \t\n\r\n '],
  ['empty string', ''],
];

const unicodeConfigs = [
  { name: 'defaults', options: {} },
  { name: 'stripControlChars', options: { stripControlChars: true } },
  { name: 'stripControlChars, preserveEmojis false', options: { stripControlChars: true, preserveEmojis: false } },
  { name: 'collapseWhitespace false', options: { collapseWhitespace: false } },
  { name: 'trim false', options: { trim: false } },
  { name: 'collapseWhitespace false, trim false', options: { collapseWhitespace: false, trim: false } },
  { name: 'everything on', options: { stripControlChars: true, preserveEmojis: true, collapseWhitespace: true, trim: true } },
];

async function recordUnicode() {
  const configs = [];
  for (const { name, options } of unicodeConfigs) {
    const processor = new UnicodeNormalizer(options);
    const outputs = [];
    for (const [, text] of unicodeInputs) {
      const msg = dbMessage('m1', 'user', [text]);
      const out = await processor.processInput({ messages: [msg], abort: runnerAbort(processor), state: {}, retryCount: 0 });
      outputs.push(out[0].content.parts[0].text);
    }
    configs.push({ name, options, outputs });
  }

  // Message shape: every text part and a string content.content are normalized;
  // other parts pass through; a message without content.content gets none.
  const processor = new UnicodeNormalizer();
  const messages = [
    dbMessage('m1', 'user', ['  ﬁrst  part ', { type: 'step-start' }, 'second\r\n\r\npart '], { content: '  ﬁrst  part second\n\npart ' }),
    dbMessage('m2', 'assistant', ['Ｘ  Ｙ']),
    {
      id: 'm3',
      role: 'user',
      createdAt: new Date(Date.UTC(2024, 0, 1)),
      content: { format: 2, parts: [{ type: 'file', data: 'aGk=', mimeType: 'text/plain' }], content: '\t① \t' },
    },
  ];
  const out = await processor.processInput({ messages, abort: runnerAbort(processor), state: {}, retryCount: 0 });
  return {
    processorId: processor.id,
    phase: 'processInput',
    note: 'outputs[i] is the normalized text of a single-part user message whose text is inputs[i].text',
    inputs: unicodeInputs.map(([name, text]) => ({ name, text })),
    configs,
    messageShape: {
      options: {},
      input: messageTexts(messages),
      output: messageTexts(out),
    },
  };
}

// ---------------------------------------------------------------------------
// RegexFilterProcessor

const regexInputs = [
  ['clean', 'The weather is nice today. Meeting at 10:30, room 4.'],
  ['email', 'Contact me at john.doe+work@example.co.uk please.'],
  ['two emails', 'a@b.io and first.last@sub.domain.org'],
  ['phone dashes', 'Call 555-123-4567 now'],
  ['phone parens', 'Call (555) 123-4567 now'],
  ['phone dots with country', 'Call +1.555.123.4567 now'],
  ['phone plus one dashes', 'Call +1-555-123-4567 now'],
  ['phone spaces', 'Call 555 123 4567 now'],
  ['phone bare digits', 'Call 5551234567 now'],
  ['phone 1 prefix parens', 'Call 1 (800) 555-0199 now'],
  ['ssn', 'My SSN is 123-45-6789.'],
  ['credit card spaces', 'Card 4111 1111 1111 1111 exp 12/29'],
  ['credit card dashes', 'Card 4111-1111-1111-1111 exp 12/29'],
  ['credit card bare', 'Card 4111111111111111 exp 12/29'],
  ['api key equals', 'api_key=sk_live_abcdefghijklmnopqrstuvwxyz012'],
  ['api key quoted colon', "API-KEY: 'ABCDEFGHIJ1234567890xyz'"],
  ['api secret', 'api_secret = "0123456789abcdefghijKLMN"'],
  ['api key too short', 'apikey=short123'],
  ['bearer token', 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig-_x'],
  ['aws access key', 'key AKIAIOSFODNN7EXAMPLE here'],
  ['aws session key', 'ASIAY34FZKBOKMUTVV7A'],
  ['url https', 'See https://example.com/path?q=1&x=2#frag for details.'],
  ['url http trailing period', 'Docs: http://foo.bar/baz.'],
  ['url in angle brackets', '<https://a.b/c> and "http://q.r/s"'],
  ['mixed everything', 'Email bob@corp.com, call (555) 123-4567, url https://corp.com/x, Bearer abc.def, AKIAABCDEFGHIJKLMNOP.'],
];

const rulesView = rules => rules?.map(r => ({ name: r.name, pattern: r.pattern.source, flags: r.pattern.flags, ...(r.replacement !== undefined ? { replacement: r.replacement } : {}) }));
const optionsView = options => ({ ...options, ...(options.rules ? { rules: rulesView(options.rules) } : {}) });

const customRules = [
  { name: 'internal-id', pattern: /INTERNAL-\d{6}/g, replacement: '[INTERNAL_ID]' },
  { name: 'codename', pattern: /\bproject\s+(falcon|eagle)\b/gi },
];
const captureRules = [{ name: 'order', pattern: /order #(\d+)/g, replacement: 'order #<$1>' }];
const overlapRules = [
  { name: 'digits', pattern: /\d{4,}/g, replacement: '[DIGITS]' },
  { name: 'prefixed', pattern: /ID-\d+/g, replacement: '[ID]' },
];
const nonGlobalRules = [{ name: 'first-secret', pattern: /secret\d/, replacement: '[S]' }];
const customInputs = [
  ['custom clean', 'nothing to see'],
  ['internal id', 'Ticket INTERNAL-123456 and INTERNAL-654321.'],
  ['codename', 'Project Falcon launches; project eagle waits; projects falcon no.'],
  ['capture replacement', 'order #42 and order #7'],
  ['overlap', 'ref ID-123456 and 98765'],
  ['non-global', 'secret1 secret2'],
];

const regexInputConfigs = [
  { name: 'pii block', options: { presets: ['pii'] } },
  { name: 'pii redact', options: { presets: ['pii'], strategy: 'redact' } },
  { name: 'pii warn', options: { presets: ['pii'], strategy: 'warn' } },
  { name: 'secrets block', options: { presets: ['secrets'], strategy: 'block' } },
  { name: 'secrets redact', options: { presets: ['secrets'], strategy: 'redact' } },
  { name: 'urls block', options: { presets: ['urls'], strategy: 'block', phase: 'input' } },
  { name: 'urls redact', options: { presets: ['urls'], strategy: 'redact', phase: 'input' } },
  { name: 'all presets block', options: { presets: ['pii', 'secrets', 'urls'] } },
  { name: 'all presets redact', options: { presets: ['pii', 'secrets', 'urls'], strategy: 'redact' } },
  { name: 'all presets redact with values', options: { presets: ['pii', 'secrets', 'urls'], strategy: 'redact', includeRedactedValues: true } },
  { name: 'pii redact, phase output (input untouched)', options: { presets: ['pii'], strategy: 'redact', phase: 'output' } },
  { name: 'pii block, phase output (input untouched)', options: { presets: ['pii'], strategy: 'block', phase: 'output' } },
];
const customConfigs = [
  { name: 'custom rules block', options: { rules: customRules } },
  { name: 'custom rules redact', options: { rules: customRules, strategy: 'redact' } },
  { name: 'custom rules warn', options: { rules: customRules, strategy: 'warn' } },
  { name: 'capture group replacement redact', options: { rules: captureRules, strategy: 'redact' } },
  { name: 'overlapping rules redact', options: { rules: overlapRules, strategy: 'redact' } },
  { name: 'overlapping rules block', options: { rules: overlapRules, strategy: 'block' } },
  { name: 'non-global rule redact', options: { rules: nonGlobalRules, strategy: 'redact' } },
  { name: 'preset plus custom redact', options: { presets: ['pii'], rules: customRules, strategy: 'redact' } },
];

function makeRegex(options) {
  const processor = new RegexFilterProcessor(options);
  const violations = [];
  processor.onViolation = v => {
    violations.push(plain(v));
  };
  return { processor, violations };
}

async function runRegexInput(options, messages) {
  const { processor, violations } = makeRegex(options);
  const { value, warnings } = await withWarnings(() =>
    capture(() =>
      processor.processInput({ messages, systemMessages: [], state: {}, abort: runnerAbort(processor), retryCount: 0 }),
    ),
  );
  const result = {};
  if (value.ok) result.output = messageTexts(value.ok);
  else Object.assign(result, value);
  if (violations.length) result.violations = violations;
  if (warnings.length) result.warnings = warnings;
  return result;
}

async function runRegexOutputResult(options, messages) {
  const { processor, violations } = makeRegex(options);
  const { value, warnings } = await withWarnings(() =>
    capture(() =>
      processor.processOutputResult({
        messages,
        state: {},
        abort: runnerAbort(processor),
        retryCount: 0,
        result: { text: '', usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, finishReason: 'unknown', steps: [] },
      }),
    ),
  );
  const result = {};
  if (value.ok) result.output = messageTexts(value.ok);
  else Object.assign(result, value);
  if (violations.length) result.violations = violations;
  if (warnings.length) result.warnings = warnings;
  return result;
}

async function runRegexStream(options, parts) {
  const { processor, violations } = makeRegex(options);
  const { value: emitted, warnings } = await withWarnings(() => runStream(processor, parts));
  const result = { emitted };
  if (violations.length) result.violations = violations;
  if (warnings.length) result.warnings = warnings;
  return result;
}

async function recordRegex() {
  const inputTable = [];
  const runTable = async (configs, inputs) => {
    for (const { name, options } of configs) {
      const results = [];
      for (const [, text] of inputs) results.push(await runRegexInput(options, [dbMessage('m1', 'user', [text])]));
      inputTable.push({ name, options: optionsView(options), inputs: inputs.map(([n]) => n), results });
    }
  };
  await runTable(regexInputConfigs, regexInputs);
  await runTable(customConfigs, customInputs);

  // Several messages and parts: reports carry messageId and partIndex; block
  // collects matches over every text part of every message.
  const multi = [
    dbMessage('m1', 'user', ['mail a@b.io', { type: 'step-start' }, 'call 555-123-4567 or c@d.org']),
    dbMessage('m2', 'assistant', ['no pii here']),
    { id: 'm3', role: 'user', createdAt: new Date(Date.UTC(2024, 0, 1)), content: 'string content x@y.com' },
    dbMessage('m4', 'user', ['url https://z.io and SSN 123-45-6789']),
  ];
  const multiMessage = [];
  for (const options of [
    { presets: ['pii', 'urls'], strategy: 'block' },
    { presets: ['pii', 'urls'], strategy: 'redact' },
    { presets: ['pii', 'urls'], strategy: 'warn' },
  ]) {
    multiMessage.push({ options, input: messageTexts(multi), ...(await runRegexInput(options, multi)) });
  }

  // processOutputResult over response messages.
  const assistant = [
    dbMessage('r1', 'assistant', ['Sure, write to help@corp.com or call 555-123-4567.']),
    dbMessage('r2', 'assistant', ['Token: Bearer abc.def-ghi']),
  ];
  const outputResult = [];
  for (const options of [
    { presets: ['pii'], strategy: 'block' },
    { presets: ['pii'], strategy: 'redact' },
    { presets: ['pii', 'secrets'], strategy: 'redact', phase: 'output' },
    { presets: ['pii'], strategy: 'warn', phase: 'all' },
    { presets: ['pii'], strategy: 'redact', phase: 'input' },
    { presets: ['secrets'], strategy: 'block', phase: 'output' },
  ]) {
    outputResult.push({ options, input: messageTexts(assistant), ...(await runRegexOutputResult(options, assistant)) });
  }

  // processOutputStream: text-delta chunks, with matches inside one chunk and
  // split across chunk boundaries.
  const streams = [
    ['email in one chunk', ['Write to ', 'john.doe@example.com', ' today.']],
    ['email split across chunks', ['Write to john.doe@exa', 'mple.com', ' today.']],
    ['phone split across three chunks', ['Call 555-', '123-', '4567 now']],
    ['clean text', ['Hello', ' there', '!']],
    ['bearer token split', ['Use Bearer abc', 'def.ghi-jkl', ' to auth']],
    ['empty delta in the middle', ['Mail a@', '', 'b.io ok']],
  ];
  const longText = 'x'.repeat(20) + ' mail me at someone@example.com ' + 'y'.repeat(20) + ' or call 555-123-4567 ' + 'z'.repeat(10);
  const longChunks = [];
  for (let i = 0; i < longText.length; i += 9) longChunks.push(longText.slice(i, i + 9));
  streams.push(['long text in 9-char chunks', longChunks]);

  const streamConfigs = [
    { presets: ['pii', 'secrets'], strategy: 'block', phase: 'output' },
    { presets: ['pii', 'secrets'], strategy: 'warn', phase: 'output' },
    { presets: ['pii', 'secrets'], strategy: 'redact', phase: 'output' },
    { presets: ['pii', 'secrets'], strategy: 'redact', phase: 'output', streamCarryoverSize: 8 },
    { presets: ['pii', 'secrets'], strategy: 'redact', phase: 'output', streamCarryoverSize: 24 },
    { presets: ['pii', 'secrets'], strategy: 'redact', phase: 'output', streamCarryoverSize: 24, includeRedactedValues: true },
    { presets: ['pii', 'secrets'], strategy: 'redact', phase: 'input' },
  ];
  const outputStream = [];
  for (const options of streamConfigs) {
    for (const [name, deltas] of streams) {
      const parts = streamOf(deltas);
      outputStream.push({ name, options, input: chunkInput(parts), ...(await runRegexStream(options, parts)) });
    }
  }
  // A text run interrupted by a non-text chunk (reasoning) and resumed.
  {
    const parts = [
      textStart(),
      textDelta('first a@b.io and c@d'),
      { type: 'reasoning-delta', runId: RUN, from: FROM, payload: { id: 'r1', text: 'thinking' } },
      textDelta('.org second e@f.io'),
      textEnd(),
      finish(),
    ];
    const options = { presets: ['pii'], strategy: 'redact', phase: 'output', streamCarryoverSize: 4 };
    outputStream.push({ name: 'text run interrupted by reasoning', options, input: chunkInput(parts), ...(await runRegexStream(options, parts)) });
  }

  let constructorErrors = [];
  for (const options of [{}, { rules: [] }, { presets: ['pii'], streamCarryoverSize: 0 }, { presets: ['pii'], streamCarryoverSize: 1.5 }]) {
    try {
      new RegexFilterProcessor(options);
      constructorErrors.push({ options, error: null });
    } catch (err) {
      constructorErrors.push({ options, error: err.message });
    }
  }

  return {
    processorId: 'regex-filter',
    note:
      'processInput: results[i] is the run over a single user message whose only part is the i-th named input of regexInputs/customInputs. ' +
      'output lists per message its parts (text, or {type}) and content.content if present; tripwire is the TripWire thrown (message, options.retry, options.metadata, processorId as the runner sets it); ' +
      'violations are the onViolation callbacks the processor made itself (redact); warnings are console.warn lines. ' +
      'outputStream: each chunk went through ProcessorRunner.processPart with a writer, then drainReprocessParts, as the agent output stream does; emitted[].from is the index of the input chunk being processed.',
    regexInputs: regexInputs.map(([name, text]) => ({ name, text })),
    customInputs: customInputs.map(([name, text]) => ({ name, text })),
    processInput: inputTable,
    multiMessage,
    processOutputResult: outputResult,
    processOutputStream: outputStream,
    constructorErrors,
  };
}

// ---------------------------------------------------------------------------
// TokenLimiterProcessor

const toolInvocation = (toolCallId, state, args, result) => ({
  type: 'tool-invocation',
  toolInvocation: { state, toolCallId, toolName: 'weather', args, ...(state === 'result' ? { result } : {}) },
});

function conversation() {
  return [
    dbMessage('m1', 'user', ['Hi, I want to plan a trip to Lisbon next spring. What should I know?']),
    dbMessage('m2', 'assistant', ['Lisbon in spring is lovely: mild weather, fewer crowds, and long evenings. Pack layers.']),
    dbMessage('m3', 'user', ['What is the weather there right now?']),
    dbMessage('m4', 'assistant', [
      toolInvocation('call-1', 'result', { city: 'Lisbon' }, { tempC: 18, sky: 'partly cloudy', wind: '12 km/h' }),
      'It is 18°C and partly cloudy.',
    ]),
    dbMessage('m5', 'user', ['Great. And in Porto?']),
    dbMessage('m6', 'assistant', [toolInvocation('call-2', 'result', { city: 'Porto' }, 'Rainy, 14°C')]),
    dbMessage('m7', 'user', ['Thanks! Summarize both in one sentence.']),
  ];
}

const SYSTEMS = ['You are a helpful travel assistant. Answer briefly and accurately.', 'Always use metric units.'];

function conversationPrompt() {
  const user = text => ({ role: 'user', content: [{ type: 'text', text }] });
  const assistant = text => ({ role: 'assistant', content: [{ type: 'text', text }] });
  return [
    ...SYSTEMS.map(content => ({ role: 'system', content })),
    user('Hi, I want to plan a trip to Lisbon next spring. What should I know?'),
    assistant('Lisbon in spring is lovely: mild weather, fewer crowds, and long evenings. Pack layers.'),
    user('What is the weather there right now?'),
    {
      role: 'assistant',
      content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'weather', input: { city: 'Lisbon' } }],
    },
    {
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'call-1',
          toolName: 'weather',
          output: { type: 'json', value: { tempC: 18, sky: 'partly cloudy', wind: '12 km/h' } },
        },
      ],
    },
    assistant('It is 18°C and partly cloudy.'),
    user('Great. And in Porto?'),
    {
      role: 'assistant',
      content: [{ type: 'tool-call', toolCallId: 'call-2', toolName: 'weather', input: '{"city":"Porto"}' }],
    },
    {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'call-2', toolName: 'weather', output: { type: 'text', value: 'Rainy, 14°C' } }],
    },
    user('Thanks! Summarize both in one sentence.'),
  ];
}

const promptView = prompt =>
  prompt.map(m => {
    if (m.role === 'system') return { role: 'system', text: m.content };
    return {
      role: m.role,
      parts: m.content.map(p =>
        p.type === 'text' ? p.text : p.type === 'tool-call' ? { toolCall: p.toolCallId } : p.type === 'tool-result' ? { toolResult: p.toolCallId } : { type: p.type },
      ),
    };
  });

function buildMessageList(systems, messages) {
  const list = new MessageList();
  for (const s of systems) list.addSystem(s);
  if (messages.length) list.add(messages, 'memory');
  return list;
}

async function runInputStep(options, systems, messages) {
  const processor = new TokenLimiterProcessor(options);
  const list = buildMessageList(systems, messages);
  const before = list.get.all.db().map(m => m.id);
  const r = await capture(() =>
    processor.processInputStep({
      messages: list.get.all.db(),
      messageList: list,
      systemMessages: list.getAllSystemMessages(),
      stepNumber: 0,
      steps: [],
      state: {},
      abort: runnerAbort(processor),
      retryCount: 0,
    }),
  );
  if (!r.ok && r.tripwire === undefined && r.error) return r;
  return r.tripwire ? { before, ...r } : { before, kept: list.get.all.db().map(m => m.id) };
}

async function runLLMRequest(options, prompt) {
  const processor = new TokenLimiterProcessor(options);
  const r = await capture(() =>
    processor.processLLMRequest({
      prompt,
      model: undefined,
      stepNumber: 0,
      steps: [],
      state: {},
      retryCount: 0,
      abort: runnerAbort(processor),
    }),
  );
  if (r.tripwire || r.error) return r;
  return r.ok === undefined ? { unchanged: true } : { kept: promptView(r.ok.prompt) };
}

async function recordTokenLimiter() {
  const probe = new TokenLimiterProcessor({ limit: 1000 });
  const messages = conversation();
  const list = buildMessageList(SYSTEMS, messages);
  const perMessage = [];
  for (const m of list.get.all.db()) perMessage.push({ id: m.id, role: m.role, tokens: await probe.countMessage(m) });
  const perSystem = [];
  for (const m of list.getAllSystemMessages()) perSystem.push({ text: m.content, tokens: await probe.countCoreSystemMessageTokens(m) });
  const prompt = conversationPrompt();
  const perPromptMessage = prompt.map((m, i) => ({ index: i, role: m.role, tokens: probe.countPromptMessageTokens(m) }));

  // Extra shapes for the persisted-message counter.
  const extraMessages = [
    dbMessage('x1', 'user', ['']),
    dbMessage('x2', 'user', ['one', 'two']),
    { id: 'x3', role: 'user', createdAt: new Date(0), content: 'plain string content' },
    { id: 'x4', role: 'user', createdAt: new Date(0), content: { format: 2, content: 'content only, no parts' } },
    dbMessage('x5', 'assistant', [toolInvocation('c1', 'call', { q: 'x' })]),
    dbMessage('x6', 'assistant', [toolInvocation('c2', 'call', '{"q":"x"}')]),
    dbMessage('x7', 'assistant', [toolInvocation('c3', 'result', { q: 'x' }, { ok: true }), toolInvocation('c4', 'result', {}, 'done')]),
    dbMessage('x8', 'assistant', [{ type: 'reasoning', reasoning: 'hmm', details: [{ type: 'text', text: 'hmm' }] }, 'answer']),
    dbMessage('x9', 'user', [{ type: 'file', data: 'data:image/png;base64,iVBORw0KGgo=', mimeType: 'image/png' }, 'what is this?']),
    dbMessage('x10', 'user', [{ type: 'file', data: 'aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=', mimeType: 'text/plain' }]),
    dbMessage('x11', 'assistant', [toolInvocation('c5', 'result', {}, { data: 'AAAA', mediaType: 'image/jpeg', name: 'pic' })]),
  ];
  const perExtraMessage = [];
  for (const m of extraMessages) {
    perExtraMessage.push({ message: plain({ ...m, createdAt: undefined }), tokens: await probe.countMessage(m) });
  }
  const extraPrompt = [
    { role: 'system', content: '' },
    { role: 'user', content: [{ type: 'text', text: '' }] },
    { role: 'assistant', content: [{ type: 'reasoning', text: 'let me think' }, { type: 'text', text: 'ok' }] },
    { role: 'user', content: [{ type: 'file', data: 'iVBORw0KGgo=', mediaType: 'image/png' }, { type: 'text', text: 'see' }] },
    { role: 'user', content: [{ type: 'file', data: 'https://example.com/doc.pdf', mediaType: 'application/pdf' }] },
    { role: 'user', content: [{ type: 'file', data: 'aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=', mediaType: 'text/plain' }] },
    {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'e1', toolName: 't', output: { type: 'error-text', value: 'boom' } }],
    },
    {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'e2', toolName: 't', output: { type: 'error-json', value: { code: 1 } } }],
    },
    {
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'e3',
          toolName: 't',
          output: { type: 'content', value: [{ type: 'text', text: 'caption' }, { type: 'media', data: 'AAAA', mediaType: 'image/png' }] },
        },
      ],
    },
  ];
  const perExtraPromptMessage = extraPrompt.map(m => ({ message: m, tokens: probe.countPromptMessageTokens(m) }));

  // processLLMRequest: what the agent loop runs for best-fit / contiguous.
  const llmRequest = [];
  for (const limit of [10000, 200, 160, 150, 140, 130, 120, 110, 100, 95, 90, 85, 80, 75, 70, 66, 60]) {
    for (const trimMode of ['best-fit', 'contiguous']) {
      llmRequest.push({ options: { limit, trimMode }, ...(await runLLMRequest({ limit, trimMode }, prompt)) });
    }
  }
  llmRequest.push({ name: 'number options', options: 100, ...(await runLLMRequest(100, prompt)) });
  const onlySystem = prompt.filter(m => m.role === 'system');
  llmRequest.push({ name: 'no non-system messages', options: { limit: 1000 }, ...(await runLLMRequest({ limit: 1000 }, onlySystem)) });
  llmRequest.push({ name: 'empty prompt', options: { limit: 1000 }, ...(await runLLMRequest({ limit: 1000 }, [])) });
  llmRequest.push({ name: 'system alone over limit', options: { limit: 40 }, ...(await runLLMRequest({ limit: 40 }, prompt)) });
  llmRequest.push({ name: 'system exactly at limit', options: { limit: 24 + perPromptMessage[0].tokens + perPromptMessage[1].tokens }, ...(await runLLMRequest({ limit: 24 + perPromptMessage[0].tokens + perPromptMessage[1].tokens }, prompt)) });
  llmRequest.push({ name: 'system plus overhead just under limit', options: { limit: 55 }, ...(await runLLMRequest({ limit: 55 }, prompt)) });
  llmRequest.push({ name: 'memory-only ignores request', options: { limit: 10, trimMode: 'memory-only' }, ...(await runLLMRequest({ limit: 10, trimMode: 'memory-only' }, prompt)) });

  // processInputStep without llmRequestStage (legacy path: trims the message list).
  const inputStep = [];
  for (const limit of [10000, 200, 160, 150, 140, 130, 120, 110, 100, 95, 90, 85, 80, 75, 70, 66, 60]) {
    for (const trimMode of ['best-fit', 'contiguous']) {
      inputStep.push({ options: { limit, trimMode }, ...(await runInputStep({ limit, trimMode }, SYSTEMS, conversation())) });
    }
  }
  inputStep.push({ name: 'no messages', options: { limit: 1000 }, ...(await runInputStep({ limit: 1000 }, SYSTEMS, [])) });
  inputStep.push({ name: 'system alone over limit', options: { limit: 40 }, ...(await runInputStep({ limit: 40 }, SYSTEMS, conversation())) });
  inputStep.push({ name: 'system plus overhead just under limit', options: { limit: 55 }, ...(await runInputStep({ limit: 55 }, SYSTEMS, conversation())) });

  // processOutputStream.
  const deltas = ['Hello', ' there, my friend.', ' This is a somewhat longer sentence with many words in it.', ' And', ' a final bit.'];
  const streamParts = [
    { type: 'step-start', runId: RUN, from: FROM, payload: { request: { body: 'x'.repeat(500) } } },
    textStart(),
    textDelta(deltas[0]),
    textDelta(deltas[1]),
    { type: 'reasoning-delta', runId: RUN, from: FROM, payload: { id: 'r1', text: 'a long hidden reasoning text that is not counted' } },
    textDelta(deltas[2]),
    textDelta(''),
    textDelta(deltas[3]),
    { type: 'tool-call', runId: RUN, from: FROM, payload: { toolCallId: 'c1', toolName: 't', args: { a: 'b'.repeat(50) } } },
    textDelta(deltas[4]),
    textEnd(),
    finish(),
  ];
  const deltaTokens = streamParts.filter(p => p.type === 'text-delta').map(p => ({ text: p.payload.text, tokens: tokenx.estimateTokenCount(p.payload.text) }));
  const outputStream = [];
  for (const strategy of ['truncate', 'abort']) {
    for (const countMode of ['cumulative', 'part']) {
      for (const limit of [0, 3, 5, 8, 12, 100]) {
        const processor = new TokenLimiterProcessor({ limit, strategy, countMode });
        outputStream.push({ options: { limit, strategy, countMode }, emitted: await runStream(processor, streamParts) });
      }
    }
  }
  {
    const processor = new TokenLimiterProcessor(4);
    outputStream.push({ name: 'number options', options: 4, emitted: await runStream(processor, streamParts) });
  }
  const objectParts = [
    { type: 'object', runId: RUN, from: FROM, object: { a: 1 } },
    { type: 'object', runId: RUN, from: FROM, object: { a: 1, b: 'two words' } },
    { type: 'object', runId: RUN, from: FROM, object: { a: 1, b: 'two words', c: [1, 2, 3] } },
    finish(),
  ];
  for (const [limit, strategy] of [[6, 'truncate'], [6, 'abort']]) {
    const processor = new TokenLimiterProcessor({ limit, strategy });
    outputStream.push({ name: 'object chunks', options: { limit, strategy }, input: chunkInput(objectParts), emitted: await runStream(processor, objectParts) });
  }

  // processOutputResult (non-streaming).
  const resultMessages = [
    dbMessage('r0', 'user', ['user text is never counted here, however long it is']),
    dbMessage('r1', 'assistant', ['The quick brown fox jumps over the lazy dog.', { type: 'step-start' }, 'Second part of the answer, rather longer than the first one.']),
    dbMessage('r2', 'assistant', ['Third: 😀 emoji 日本語 text']),
  ];
  const outputResult = [];
  for (const strategy of ['truncate', 'abort']) {
    for (const limit of [0, 5, 10, 14, 20, 30, 1000]) {
      const processor = new TokenLimiterProcessor({ limit, strategy });
      const r = await capture(() => processor.processOutputResult({ messages: resultMessages, abort: runnerAbort(processor), state: {}, retryCount: 0 }));
      outputResult.push({ options: { limit, strategy }, ...(r.ok ? { output: messageTexts(r.ok) } : r) });
    }
  }

  return {
    processorId: probe.id,
    constants: { TOKENS_PER_MESSAGE: 3.8, TOKENS_PER_CONVERSATION: 24 },
    note:
      'In the agent loop (1.71.0) best-fit/contiguous input trimming runs in processLLMRequest over the LanguageModelV2 prompt (processInputStep returns early because the runner passes llmRequestStage); ' +
      'processInputStep is recorded too (the legacy path, trimming the MessageList). Counts are not rounded (3.8 per message). ' +
      'outputStream entries were driven through ProcessorRunner.processPart with a writer, as the agent output stream does; custom entries are writer.custom() chunks.',
    systems: SYSTEMS,
    conversation: messageTexts(messages),
    prompt: promptView(prompt),
    counts: { perMessage, perSystem, perPromptMessage, perExtraMessage, perExtraPromptMessage },
    processLLMRequest: llmRequest,
    processInputStep: inputStep,
    outputStreamInput: chunkInput(streamParts),
    deltaTokens,
    processOutputStream: outputStream,
    processOutputResultInput: messageTexts(resultMessages),
    processOutputResult: outputResult,
  };
}

// ---------------------------------------------------------------------------
// tokenx estimateTokenCount

const tokenxStrings = [
  '',
  ' ',
  '   \t\n  ',
  'a',
  'ab',
  'abc',
  'abcd',
  'Hello',
  'Hello world',
  'Hello, world!',
  'The quick brown fox jumps over the lazy dog.',
  'Tokenization is a surprisingly subtle problem in natural language processing.',
  'internationalization',
  'supercalifragilisticexpialidocious',
  'pneumonoultramicroscopicsilicovolcanoconiosis',
  'Donaudampfschifffahrtsgesellschaftskapitän',
  'Straße Größe Übermäßig',
  'Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz',
  'Le café est très élevé à Paris, où naïve façade œuvre.',
  'Zażółć gęślą jaźń, příliš žluťoučký kůň',
  'El niño comió piña en España.',
  'Привет, как дела? Всё хорошо.',
  'Съешь же ещё этих мягких французских булок',
  'مرحبا بالعالم، كيف حالك؟',
  'שלום עולם',
  'Γειά σου Κόσμε',
  '你好，世界！',
  '我喜欢学习编程和人工智能。',
  'こんにちは、世界。カタカナ テスト',
  '안녕하세요 세계',
  'ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ',
  'mixed 中文 and English 混合',
  '😀',
  '😀😃😄😁',
  '👨‍👩‍👧‍👦 family',
  'I ❤️ NY 🗽',
  '12345',
  '3.14159',
  '1,000,000.50',
  '1.2.3.4',
  '2024-01-15',
  '12:30:45',
  '$1,234.56',
  '-42',
  '...',
  '!!!???',
  '----------',
  '==',
  '()[]{}<>',
  '@#$%^&*',
  '"quoted"',
  "it's don't won't",
  'a_b_c snake_case_name',
  'camelCaseIdentifierName',
  'https://example.com/path/to/resource?query=value&other=123#section',
  'user.name+tag@example.co.uk',
  'function add(a, b) {\n  return a + b;\n}',
  'const x = arr.map((v) => v * 2).filter(Boolean);',
  'fn main() { println!("Hello, {}!", name); }',
  'SELECT id, name FROM users WHERE age > 21 ORDER BY name;',
  '{"name":"Alice","age":30,"tags":["a","b"],"nested":{"ok":true,"n":null}}',
  '<div class="container"><p>Hello</p></div>',
  '# Heading\n\n- item one\n- item two\n\n**bold** and _italic_',
  'C:\\Users\\name\\Documents\\file.txt',
  'SGVsbG8gd29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQ=',
  '0x1F600 0xDEADBEEF',
  'e.g. i.e. etc. vs. Mr. Dr.',
  'tab\tseparated\tvalues',
  'line1\nline2\r\nline3',
  'àéîõü',
  'ÀÉÎÕÜ ÿ',
  'naïve',
  'résumé',
  'x'.repeat(100),
  'word '.repeat(50).trim(),
  'The year 2024 had 366 days; π ≈ 3.14159 and e ≈ 2.71828.',
  '∑∫∂√∞ ≠ ≤ ≥',
  '\u00A0nbsp\u00A0separated\u00A0',
  'zero\u200Bwidth\u200Bspace',
];

function recordTokenx() {
  return {
    version: tokenx.version,
    source: `bundled in @mastra/core/dist/${tokenx.chunk}`,
    cases: tokenxStrings.map(text => ({ text, tokens: tokenx.estimateTokenCount(text) })),
  };
}

// ---------------------------------------------------------------------------

const fixture = {
  about:
    'Recorded by tests/reference/record/processors.mjs against @mastra/core ' +
    version +
    ': the rule-based processors called directly with the arguments the agent loop passes (runner-shaped abort that throws TripWire(reason, options, processorId)), and tokenx estimateTokenCount.',
  mastraCoreVersion: version,
  unicodeNormalizer: await recordUnicode(),
  regexFilter: await recordRegex(),
  tokenLimiter: await recordTokenLimiter(),
  tokenx: recordTokenx(),
};

writeFixture('processors.json', fixture);
