// agentd playground: a page over the JSON mapping on the same origin (POST /{service}/{method},
// streams as NDJSON). No framework and no build step: the file the browser runs is this one.

const $ = (id) => document.getElementById(id);

/** Builds an element: h("div", {class: "x", onclick}, child, "text", …). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name in el && typeof value !== "string") el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
/** "FINISH_REASON_TOOL_CALLS" → "tool calls". */
const enumText = (value, prefix) => (value || "").replace(prefix, "").toLowerCase().replaceAll("_", " ");
const randomId = (prefix) => `${prefix}-${crypto.getRandomValues(new Uint32Array(2)).join("").slice(0, 12)}`;
const randomHex = (bytes) => Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");

// ---------------------------------------------------------------------------------------------
// Calls

const CODES = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
  "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
  "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"];

/** A failed call: its gRPC code, message and the fields a BadRequest names. */
class ApiError extends Error {
  constructor(status) {
    const fields = (status.details || [])
      .flatMap((d) => d.fieldViolations || [])
      .map((v) => `${v.field}: ${v.description}`);
    super([status.message || "request failed", ...fields].join("; "));
    this.code = status.code ?? 2;
  }
  get codeName() { return CODES[this.code] || `code ${this.code}`; }
}

const KEY_STORAGE = "agentd.playground.key";

const api = {
  key: sessionStorage.getItem(KEY_STORAGE) || "",

  headers(extra = {}) {
    const headers = { "content-type": "application/json", ...extra };
    if (this.key) headers.authorization = `Bearer ${this.key}`;
    return headers;
  },

  async failure(response) {
    const text = await response.text();
    try {
      return new ApiError(JSON.parse(text));
    } catch {
      return new ApiError({ code: 2, message: `HTTP ${response.status}: ${text.slice(0, 200)}` });
    }
  },

  /** One unary call; resolves to the response message. */
  async call(method, body = {}) {
    const response = await fetch(`/${method}`, { method: "POST", headers: this.headers(), body: JSON.stringify(body) });
    if (!response.ok) throw await this.failure(response);
    return response.json();
  },

  /** A server stream: yields each message; `onOpen` sees the response headers first. */
  async *stream(method, body, { signal, onOpen, headers = {} } = {}) {
    const response = await fetch(`/${method}`, {
      method: "POST", signal, body: JSON.stringify(body),
      headers: this.headers({ accept: "application/x-ndjson", ...headers }),
    });
    if (!response.ok) throw await this.failure(response);
    onOpen?.(response.headers);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).trim();
        buffer = buffer.slice(end + 1);
        if (!line) continue;
        const message = JSON.parse(line);
        if (message.error) throw new ApiError(message.error);
        yield message.result;
      }
    }
  },
};

// ---------------------------------------------------------------------------------------------
// Page state

const state = {
  config: { authRequired: false },
  agents: [],
  agent: null,
  resource: "",
  thread: "",
  threadsToken: "",
  /** The run shown in the run bar: {view}. */
  run: null,
  /** RunView per run id on the page. */
  views: new Map(),
  /** Pending tool calls by id: {runId, suspension}. */
  pending: new Map(),
  watch: null,
};

function notice(message) {
  const el = $("notice");
  el.textContent = message || "";
  el.hidden = !message;
}

/** Reports a failed call; an authentication failure asks for the key. */
function report(error, what) {
  if (error?.name === "AbortError") return;
  if (error instanceof ApiError && error.code === 16) {
    $("key-form").hidden = false;
    notice(`${what}: this server needs an API key (${error.message}). Enter it above.`);
    $("key").focus();
    return;
  }
  const code = error instanceof ApiError ? ` (${error.codeName})` : "";
  notice(`${what}: ${error?.message || error}${code}`);
}

function saveLocation() {
  const params = new URLSearchParams();
  if (state.agent) params.set("agent", state.agent.id);
  if (state.resource) params.set("resource", state.resource);
  if (state.thread) params.set("thread", state.thread);
  history.replaceState(null, "", `#${params}`);
  localStorage.setItem("agentd.playground.resource", state.resource);
}

// ---------------------------------------------------------------------------------------------
// Agents

async function loadAgents(wanted) {
  const { agents = [] } = await api.call("agentd.v1.AgentService/ListAgents");
  state.agents = agents;
  const select = $("agent");
  select.replaceChildren(...agents.map((a) => h("option", { value: a.id }, a.name && a.name !== a.id ? `${a.name} (${a.id})` : a.id)));
  if (!agents.length) {
    notice("No agents are configured on this server: add [[agents]] to its config file.");
    return;
  }
  const agent = agents.find((a) => a.id === wanted) || agents[0];
  select.value = agent.id;
  showAgent(agent);
}

function showAgent(agent) {
  state.agent = agent;
  $("agent-name").textContent = agent.name || agent.id;
  $("agent-description").textContent = agent.description ? `— ${agent.description}` : "";
  $("agent-model").textContent = agent.model || "";
  const defaults = agent.defaultOptions || {};
  const settings = defaults.modelSettings || {};
  const rows = [
    ["Id", agent.id],
    ["Model", agent.model],
    ["Max steps", defaults.maxSteps ?? "reference default"],
    ["Tool concurrency", defaults.toolCallConcurrency ?? "reference default"],
    ["Every call approved", defaults.requireToolApproval ? "yes" : "no"],
    ...Object.entries(settings).map(([k, v]) => [k, pretty(v)]),
  ];
  const tools = agent.tools || [];
  $("agent-details").replaceChildren(
    h("dl", {}, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))])),
    h("div", {}, h("h2", {}, "Instructions"), h("pre", {}, agent.instructions || "(none)")),
    h("div", {}, h("h2", {}, `Tools (${tools.length})`),
      tools.length
        ? h("ul", { class: "tool-list" }, tools.map((t) => h("li", {},
          h("div", { class: "row" }, h("code", {}, t.name), t.requireApproval && h("span", { class: "badge warn" }, "needs approval")),
          t.description && h("div", { class: "muted" }, t.description),
          t.inputSchema && h("details", {}, h("summary", { class: "muted" }, "Input schema"), h("pre", {}, pretty(t.inputSchema))))))
        : h("p", { class: "muted" }, "No tools.")),
  );
  saveLocation();
}

// ---------------------------------------------------------------------------------------------
// Threads

async function loadThreads(more = false) {
  if (!state.resource) return;
  const request = { resourceId: state.resource, pageSize: 30, orderBy: "THREAD_ORDER_UPDATED" };
  if (more) request.pageToken = state.threadsToken;
  let response;
  try {
    response = await api.call("agentd.v1.ThreadService/ListThreads", request);
  } catch (error) {
    report(error, "Listing threads");
    return;
  }
  const list = $("threads");
  if (!more) list.replaceChildren();
  for (const thread of response.threads || []) list.append(threadItem(thread));
  state.threadsToken = response.nextPageToken || "";
  $("more-threads").hidden = !state.threadsToken;
  markCurrentThread();
}

function threadItem(thread) {
  const when = thread.updatedAt ? new Date(thread.updatedAt).toLocaleString() : "";
  const count = Number(thread.messageCount || 0);
  return h("li", {},
    h("button", { type: "button", "data-thread": thread.id, onclick: () => openThread(thread.id, thread.title) },
      thread.title || thread.id,
      h("small", {}, `${count} message${count === 1 ? "" : "s"}${when ? ` · ${when}` : ""}`)));
}

function markCurrentThread() {
  for (const button of $("threads").querySelectorAll("button")) {
    button.setAttribute("aria-current", String(button.dataset.thread === state.thread));
  }
}

function setThreadTitle(title) {
  $("thread-title").textContent = title || "Untitled thread";
}

/** Shows a thread: its history, live task list and pending approvals. */
async function openThread(id, title) {
  state.thread = id;
  state.views.clear();
  state.pending.clear();
  renderPending();
  $("messages").replaceChildren();
  $("thread-id").textContent = id;
  setThreadTitle(title);
  markCurrentThread();
  saveLocation();
  watchTasks();
  try {
    const thread = await api.call("agentd.v1.ThreadService/GetThread", { threadId: id, resourceId: state.resource });
    if (state.thread === id) setThreadTitle(thread.title);
  } catch (error) {
    // A thread id typed into the URL that has no messages yet is simply new.
    if (!(error instanceof ApiError && error.code === 5)) report(error, "Opening the thread");
  }
  await loadHistory(id);
  await refreshPending();
}

function newThread() {
  state.thread = randomId("pg");
  state.views.clear();
  state.pending.clear();
  renderPending();
  $("messages").replaceChildren();
  $("thread-id").textContent = state.thread;
  setThreadTitle("New thread");
  markCurrentThread();
  saveLocation();
  watchTasks();
  $("prompt").focus();
}

async function loadHistory(id) {
  let token = "";
  let view = null;
  // Oldest first, a page at a time; a very long thread shows its first 2,000 messages.
  for (let page = 0; page < 20; page += 1) {
    let response;
    try {
      response = await api.call("agentd.v1.ThreadService/ListMessages", { threadId: id, resourceId: state.resource, pageSize: 100, pageToken: token });
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 5)) report(error, "Loading the history");
      return;
    }
    if (state.thread !== id) return;
    for (const message of response.messages || []) {
      if (message.signal && message.signal !== "SIGNAL_KIND_UNSPECIFIED") continue;
      if (message.role === "ROLE_USER") {
        view = null;
        addUserMessage(partsText(message.content));
      } else if (message.role === "ROLE_ASSISTANT" || message.role === "ROLE_TOOL") {
        view ||= new RunView("history");
        view.addParts(message.content || []);
      }
    }
    token = response.nextPageToken;
    if (!token) break;
  }
  view?.settle();
  scrollDown();
}

const partsText = (parts = []) => parts.filter((p) => p.text).map((p) => p.text.text).join("");

// ---------------------------------------------------------------------------------------------
// Messages

function addUserMessage(text) {
  const li = h("li", { class: "msg user" }, h("div", { class: "who" }, "You"), h("div", { class: "body text" }, text));
  $("messages").append(li);
  scrollDown();
}

function scrollDown() {
  const last = $("messages").lastElementChild;
  last?.scrollIntoView({ block: "end", behavior: "auto" });
}

/** One assistant turn on the page, built from a run's chunks (or a thread's stored messages). */
class RunView {
  constructor(label) {
    this.runId = "";
    this.traceId = "";
    this.lastSequence = 0;
    this.finished = false;
    this.blocks = new Map();
    this.tools = new Map();
    this.runLabel = h("span", { class: "mono" });
    this.who = h("div", { class: "who" }, h("span", {}, state.agent?.name || state.agent?.id || "Agent"), label && h("span", {}, label), this.runLabel);
    this.body = h("div", { class: "body" });
    this.li = h("li", { class: "msg assistant" }, this.who, this.body);
    $("messages").append(this.li);
  }

  setRun(id) {
    if (!id || this.runId === id) return;
    this.runId = id;
    this.li.dataset.runId = id;
    this.runLabel.textContent = `run ${id}`;
    state.views.set(id, this);
  }

  block(id, kind) {
    const key = `${kind}:${id}`;
    let block = this.blocks.get(key);
    if (!block) {
      if (kind === "reasoning") {
        const text = h("div", { class: "text" });
        const el = h("details", { class: "reasoning part" }, h("summary", {}, "Reasoning"), text);
        this.body.append(el);
        block = { el, text };
      } else {
        const text = h("div", { class: "text part" });
        this.body.append(text);
        block = { el: text, text };
      }
      this.blocks.set(key, block);
    }
    return block;
  }

  appendText(id, kind, delta, streaming = true) {
    const { text } = this.block(id, kind);
    text.classList.toggle("streaming", streaming && kind === "text");
    text.append(delta);
  }

  endBlock(id, kind) {
    this.blocks.get(`${kind}:${id}`)?.text.classList.remove("streaming");
  }

  tool(call) {
    let card = this.tools.get(call.toolCallId);
    if (!card) {
      const badge = h("span", { class: "badge live" }, "running");
      const args = h("pre", {}, "…");
      const output = h("div");
      const el = h("details", { class: "tool part", "data-tool-call-id": call.toolCallId },
        h("summary", {}, h("code", {}, call.toolName || "tool"), badge),
        h("div", { class: "label" }, "Arguments"), args, output);
      this.body.append(el);
      card = { el, badge, args, output };
      this.tools.set(call.toolCallId, card);
    }
    // Streamed argument text first, the parsed arguments once the call is complete.
    if (call.argsTextDelta) card.args.textContent = (card.args.textContent === "…" ? "" : card.args.textContent) + call.argsTextDelta;
    if (call.args !== undefined) card.args.textContent = pretty(call.args);
    return card;
  }

  toolState(call, text, tone) {
    const card = this.tool(call);
    card.badge.textContent = text;
    card.badge.className = `badge ${tone}`;
    card.el.dataset.state = text;
    return card;
  }

  toolOutput(call, label, value, tone) {
    const card = this.toolState(call, tone === "bad" ? "failed" : "done", tone);
    card.output.replaceChildren(h("div", { class: "label" }, label), h("pre", {}, pretty(value)));
  }

  /** A sub-agent's chunk inside its supervisor's stream: a call it waits on is decided here. */
  subAgent(output) {
    const inner = output.chunk || {};
    const [kind, p] = Object.entries(inner).find(([k]) => !["runId", "sequence", "from", "metadata"].includes(k)) || [];
    if (kind === "toolCallApproval" || (kind === "toolCallSuspended" && p.kind !== "SUSPENSION_KIND_SUB_AGENT")) {
      this.note(`Sub-agent ${output.agentId} waits: ${p.toolName}`, "warn");
      addPending(inner.runId, p);
    } else if (kind === "finish") {
      this.note(`Sub-agent ${output.agentId}: ${p.text || enumText(p.finishReason, "FINISH_REASON_")}`);
    }
  }

  note(text, tone = "") {
    const el = h("div", { class: `outcome ${tone}` }, text);
    this.body.append(el);
    return el;
  }

  /** Stored message parts (history). */
  addParts(parts) {
    for (const part of parts) {
      if (part.text) this.appendText(this.blocks.size, "text", part.text.text, false);
      else if (part.reasoning) this.appendText(this.blocks.size, "reasoning", part.reasoning.text, false);
      else if (part.toolCall) this.toolState(part.toolCall, "called", "");
      else if (part.toolResult) {
        const r = part.toolResult;
        this.toolOutput(r, r.isError ? "Error" : "Result", r.result, r.isError ? "bad" : "ok");
      }
    }
  }

  /** Applies one streamed chunk. */
  apply(chunk) {
    this.setRun(chunk.runId);
    const sequence = Number(chunk.sequence || 0);
    if (sequence && sequence <= this.lastSequence) return; // already shown (re-attached)
    if (sequence) this.lastSequence = sequence;
    // The run goes on after a decision: it no longer waits.
    this.waiting?.remove();
    this.waiting = null;
    this.finished = false;
    const [kind, p] = Object.entries(chunk).find(([k]) => !["runId", "sequence", "from", "metadata"].includes(k)) || [];
    switch (kind) {
      case "start": runBar.status("running", "live"); break;
      case "textStart": this.block(p.id, "text"); break;
      case "textDelta": this.appendText(p.id, "text", p.text || ""); break;
      case "textEnd": this.endBlock(p.id, "text"); break;
      case "reasoningStart": this.block(p.id, "reasoning"); break;
      case "reasoningDelta": this.appendText(p.id, "reasoning", p.text || ""); break;
      case "reasoningEnd": this.endBlock(p.id, "reasoning"); break;
      case "toolCallDelta":
      case "toolCall": this.tool(p); break;
      case "toolCallApproval":
        this.toolState(p, "waiting for approval", "warn");
        addPending(this.runId, p);
        break;
      case "toolCallSuspended":
        // A delegation waits for its sub-agent, whose own call is the one to decide.
        if (p.kind === "SUSPENSION_KIND_SUB_AGENT") {
          this.toolState(p, "waiting for its sub-agent", "warn");
          break;
        }
        this.toolState(p, "waiting for input", "warn");
        addPending(this.runId, p);
        break;
      case "toolOutput": this.subAgent(p); break;
      case "toolResult": this.toolOutput(p, p.isError ? "Error" : "Result", p.result, p.isError ? "bad" : "ok"); break;
      case "toolError": this.toolOutput(p, "Error", p.error, "bad"); break;
      case "toolOutputDenied": this.toolState(p, "declined", "bad"); break;
      case "stepFinish": this.stepFooter(p); break;
      case "data":
        if (p.type === "data-thread-title" && p.data?.title) setThreadTitle(p.data.title);
        break;
      case "source":
        this.body.append(h("div", { class: "part muted" }, "Source: ", h("a", { href: p.url, rel: "noopener noreferrer", target: "_blank" }, p.title || p.url)));
        break;
      case "objectResult": this.body.append(h("pre", { class: "part" }, pretty(p.object))); break;
      case "tripwire": this.note(`Stopped by a guardrail: ${p.reason || "no reason given"}`, "bad"); break;
      case "abort": this.note(`Aborted${p.reason ? `: ${p.reason}` : ""}`, "warn"); break;
      case "error": this.note(`Error: ${p.error?.message || "the run failed"}${p.error?.category ? ` (${p.error.category})` : ""}`, "bad"); break;
      case "hookError": this.note(`Hook failed: ${p.message || pretty(p)}`, "warn"); break;
      case "finish": this.finish(p); break;
      default: break;
    }
    scrollDown();
  }

  stepFooter(step) {
    const u = step.usage || {};
    const tokens = ["inputTokens", "outputTokens", "totalTokens"].map((k) => Number(u[k] || 0));
    const parts = [`Step ${Number(step.stepIndex || 0) + 1}`, enumText(step.reason, "FINISH_REASON_")];
    if (tokens.some(Boolean)) parts.push(`${tokens[0]} in · ${tokens[1]} out · ${tokens[2]} tokens`);
    if (Number(u.reasoningTokens)) parts.push(`${Number(u.reasoningTokens)} reasoning`);
    this.body.append(h("div", { class: "step" }, parts.filter(Boolean).join(" · ")));
  }

  finish(result) {
    this.settle();
    this.finished = true;
    const reason = result.finishReason || "";
    if (result.traceId) {
      this.traceId = result.traceId;
      runBar.trace(result.traceId);
    }
    if (reason === "FINISH_REASON_SUSPENDED") {
      runBar.status("waiting for you", "warn");
      this.waiting = this.note("Waiting for a decision: see “Waiting for you”.", "warn");
    } else if (reason === "FINISH_REASON_ERROR" || reason === "FINISH_REASON_TRIPWIRE") {
      runBar.status(enumText(reason, "FINISH_REASON_"), "bad");
    } else if (reason === "FINISH_REASON_ABORTED") {
      runBar.status("aborted", "warn");
    } else {
      runBar.status("finished", "ok");
      // A run that stopped for another reason than the model's own (the step cap, a length
      // limit) says so, or its missing answer would puzzle.
      if (reason && reason !== "FINISH_REASON_STOP") this.note(`Ended: ${enumText(reason, "FINISH_REASON_")}${reason === "FINISH_REASON_TOOL_CALLS" ? " (the step limit was reached)" : ""}`, "warn");
    }
    const u = result.usage || result.totalUsage || {};
    if (Number(u.totalTokens)) this.note(`${Number(u.totalTokens)} tokens in all`, "muted");
  }

  settle() {
    for (const { text } of this.blocks.values()) text.classList.remove("streaming");
  }
}

// ---------------------------------------------------------------------------------------------
// The run bar: the latest run's id, status and trace

const runBar = {
  show(runId) {
    $("run-bar").hidden = false;
    $("run-id").textContent = runId || "starting…";
    $("trace").hidden = true;
  },
  status(text, tone) {
    const badge = $("run-status");
    badge.textContent = text;
    badge.className = `badge ${tone}`;
  },
  trace(id) {
    if (!id) return;
    $("trace-id").textContent = id;
    $("trace").hidden = false;
  },
  live(on) {
    $("abort").hidden = !on;
    $("send").disabled = on;
  },
};

/** Streams one call's chunks into a view (a new one unless given); re-attaches on a lost
 * connection. `headers` go with the first call only (a new run's traceparent). */
async function runStream(method, body, { view, label, headers } = {}) {
  view ||= new RunView(label);
  state.run = { view };
  runBar.show(view.runId || body.runId);
  runBar.status("starting", "live");
  runBar.live(true);
  // A continuation (after a decision) stays in the trace its run started.
  if (headers?.traceparent) view.traceId = headers.traceparent.split("-")[1];
  runBar.trace(view.traceId);
  let attempt = { method, body, headers };
  for (let retries = 0; ; retries += 1) {
    try {
      for await (const chunk of api.stream(attempt.method, attempt.body, {
        headers: attempt.headers,
        onOpen: (headers) => {
          view.traceId = headers.get("x-trace-id") || view.traceId;
          runBar.trace(view.traceId);
        },
      })) {
        if (chunk.runId && !view.runId) runBar.show(chunk.runId);
        view.apply(chunk);
      }
      break;
    } catch (error) {
      // fetch fails with a TypeError when the connection drops: the run goes on, so follow it.
      const lost = error instanceof TypeError && view.runId && !view.finished && retries < 5;
      if (!lost) {
        view.settle();
        view.note(`${error.message}${error instanceof ApiError ? ` (${error.codeName})` : ""}`, "bad");
        runBar.status("failed", "bad");
        report(error, "The run");
        break;
      }
      view.note("Connection lost; re-attaching…", "warn");
      await new Promise((resolve) => setTimeout(resolve, 500 * (retries + 1)));
      attempt = { method: "agentd.v1.AgentService/Observe", body: { runId: view.runId, afterSequence: String(view.lastSequence) } };
    }
  }
  if (state.run?.view === view) runBar.live(false);
  await refreshPending();
  loadThreads();
  return view;
}

async function send(event) {
  event.preventDefault();
  const prompt = $("prompt").value.trim();
  if (!prompt || !state.agent) return;
  let clientTools;
  try {
    clientTools = parseClientTools($("client-tools").value);
  } catch (error) {
    notice(`Run options → client tools: ${error.message}`);
    $("client-tools").focus();
    return;
  }
  notice("");
  if (!state.thread) newThread();
  const request = {
    agentId: state.agent.id,
    prompt,
    memory: { thread: { id: state.thread }, resource: state.resource },
  };
  const maxSteps = $("max-steps").value;
  if (maxSteps) request.maxSteps = Number(maxSteps);
  if ($("require-approval").checked) request.requireToolApproval = true;
  if (clientTools.length) request.clientTools = clientTools;
  $("prompt").value = "";
  addUserMessage(prompt);
  // Each run starts its own trace, so its id is known (and shown) before the first chunk; with
  // tracing on, agentd's spans join it and the id finds them in the trace viewer.
  const traceId = randomHex(16);
  await runStream("agentd.v1.AgentService/Generate", request, {
    headers: { traceparent: `00-${traceId}-${randomHex(8)}-01` },
  });
  $("prompt").focus();
}

function parseClientTools(text) {
  if (!text.trim()) return [];
  const tools = JSON.parse(text);
  if (!Array.isArray(tools)) throw new Error("expected a JSON array");
  return tools.map((tool, i) => {
    if (!tool || typeof tool.name !== "string" || !tool.name) throw new Error(`[${i}].name is required`);
    const { name, description = "", parameters, resumeSchema } = tool;
    return { name, description, parameters: parameters || { type: "object" }, ...(resumeSchema && { resumeSchema }) };
  });
}

async function abortRun(runId) {
  if (!runId) return;
  try {
    const response = await api.call("agentd.v1.AgentService/Abort", { runId, reason: "Aborted from the playground" });
    if (!response.aborted) notice(`Run ${runId} was not running.`);
  } catch (error) {
    report(error, "Aborting");
  }
}

// ---------------------------------------------------------------------------------------------
// Task list (TaskService.Watch, live)

function watchTasks() {
  state.watch?.abort();
  renderTasks([]);
  if (!state.thread) return;
  const controller = new AbortController();
  state.watch = controller;
  const request = { threadId: state.thread, resourceId: state.resource };
  (async () => {
    for (let delay = 500; !controller.signal.aborted; delay = Math.min(delay * 2, 10000)) {
      try {
        for await (const update of api.stream("agentd.v1.TaskService/Watch", request, { signal: controller.signal })) {
          delay = 500;
          renderTasks(update.tasks || []);
        }
      } catch (error) {
        if (controller.signal.aborted) return;
        if (error instanceof ApiError && error.code === 16) return report(error, "Watching the task list");
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  })();
}

const STATUS_CLASS = { TASK_STATUS_COMPLETED: "completed", TASK_STATUS_IN_PROGRESS: "in_progress" };

function renderTasks(tasks) {
  const done = tasks.filter((t) => t.status === "TASK_STATUS_COMPLETED").length;
  $("task-progress").max = Math.max(tasks.length, 1);
  $("task-progress").value = done;
  $("task-count").textContent = tasks.length ? `${done} of ${tasks.length} done` : "No tasks";
  $("tasks").replaceChildren(...tasks.map((task) => {
    const status = STATUS_CLASS[task.status] || "pending";
    const label = { completed: "done", in_progress: "in progress", pending: "to do" }[status];
    return h("li", { class: `task ${status}`, "data-task-id": task.id },
      h("span", { class: "mark", role: "img", "aria-label": label }),
      h("span", {}, h("span", { class: "content" }, task.content),
        status === "in_progress" && task.activeForm && h("span", { class: "active" }, task.activeForm)));
  }));
}

// ---------------------------------------------------------------------------------------------
// Approvals and client tools

function addPending(runId, suspension) {
  state.pending.set(suspension.toolCallId, { runId, suspension });
  renderPending();
}

async function refreshPending() {
  if (!state.thread) return;
  const thread = state.thread;
  try {
    const { runs = [] } = await api.call("agentd.v1.ApprovalService/ListPending", { threadId: thread, resourceId: state.resource });
    if (state.thread !== thread) return;
    state.pending.clear();
    for (const run of runs) {
      for (const s of run.pending || []) {
        // A supervisor waiting on a sub-agent is decided through the sub-agent's call.
        if (s.kind !== "SUSPENSION_KIND_SUB_AGENT") state.pending.set(s.toolCallId, { runId: run.runId, suspension: s });
      }
    }
    renderPending();
  } catch (error) {
    report(error, "Listing pending approvals");
  }
}

function renderPending() {
  // A call already shown keeps its element: a refresh (every stream's end lists them again)
  // must not wipe a reason or an answer the user is typing. One whose decision was sent (its
  // controls disabled) and that is still pending (the decision failed) is shown afresh.
  const shown = new Map([...$("pending").children]
    .filter((li) => !li.querySelector(":disabled"))
    .map((li) => [li.dataset.toolCallId, li]));
  const items = [...state.pending.values()].map(({ runId, suspension }) =>
    shown.get(suspension.toolCallId) || pendingItem(runId, suspension));
  $("pending").replaceChildren(...items);
  $("pending-empty").hidden = items.length > 0;
}

function pendingItem(runId, s) {
  const clientTool = s.kind === "SUSPENSION_KIND_CLIENT_TOOL";
  const what = h("div", { class: "what" }, h("code", {}, s.toolName), h("span", { class: "badge warn" }, clientTool ? "needs your answer" : "needs approval"));
  const args = h("details", {}, h("summary", { class: "muted" }, "Arguments"), h("pre", {}, pretty(s.args ?? {})));
  const li = h("li", { "data-tool-call-id": s.toolCallId, "data-run-id": runId }, what, args);
  const decide = (method, extra) => () => {
    li.querySelectorAll("button, input, textarea, select").forEach((el) => { el.disabled = true; });
    state.pending.delete(s.toolCallId);
    const view = state.views.get(runId);
    runStream(`agentd.v1.ApprovalService/${method}`, { runId, toolCallId: s.toolCallId, ...extra() }, { view, label: view ? undefined : "continued" })
      .finally(() => renderPending());
  };
  if (clientTool) {
    const form = schemaForm(s.resumeSchema);
    const submit = h("button", { type: "submit", class: "primary" }, "Send answer");
    const error = h("div", { class: "outcome bad", role: "alert" });
    const el = h("form", {
      onsubmit: (event) => {
        event.preventDefault();
        let data;
        try {
          data = form.read();
        } catch (e) {
          error.textContent = e.message;
          return;
        }
        decide("Resume", () => ({ data }))();
      },
    }, form.el, error, submit);
    li.append(el);
  } else {
    const reason = h("input", { class: "reason", placeholder: "Reason (when declining)", "aria-label": `Reason for declining ${s.toolName}` });
    li.append(h("form", { onsubmit: (event) => event.preventDefault() },
      reason,
      h("div", { class: "row" },
        h("button", { type: "button", class: "ok approve", onclick: decide("Approve", () => ({})) }, "Approve"),
        h("button", { type: "button", class: "danger solid decline", onclick: decide("Decline", () => (reason.value.trim() ? { reason: reason.value.trim() } : {})) }, "Decline"))));
  }
  return li;
}

/** A form for a JSON Schema: one input per property of an object schema, else a JSON box. */
function schemaForm(schema) {
  const properties = schema?.type === "object" || schema?.properties ? schema.properties || {} : null;
  if (!properties || !Object.keys(properties).length) {
    const box = h("textarea", { class: "mono", rows: 3, "aria-label": "Answer (JSON)", placeholder: "JSON, or plain text" });
    return {
      el: h("label", { class: "field" }, h("span", {}, "Answer (JSON)"), box),
      read() {
        const text = box.value.trim();
        if (!text) throw new Error("an answer is required");
        try { return JSON.parse(text); } catch { return text; }
      },
    };
  }
  const required = new Set(schema.required || []);
  const fields = Object.entries(properties).map(([name, prop = {}]) => {
    const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== "null") : prop.type;
    const label = `${prop.title || name}${required.has(name) ? " *" : ""}`;
    let input;
    let read;
    if (Array.isArray(prop.enum)) {
      input = h("select", { name }, !required.has(name) && h("option", { value: "" }, "—"), prop.enum.map((v, i) => h("option", { value: String(i) }, String(v))));
      read = () => (input.value === "" ? undefined : prop.enum[Number(input.value)]);
    } else if (type === "boolean") {
      input = h("input", { type: "checkbox", name });
      read = () => input.checked;
      return { name, read, el: h("label", { class: "check" }, input, label) };
    } else if (type === "number" || type === "integer") {
      input = h("input", { type: "number", name, step: type === "integer" ? "1" : "any" });
      read = () => (input.value === "" ? undefined : Number(input.value));
    } else if (type === "string" || !type) {
      input = prop.maxLength > 200 || prop.format === "textarea" ? h("textarea", { name, rows: 3 }) : h("input", { name, autocomplete: "off" });
      read = () => (input.value === "" ? undefined : input.value);
    } else {
      input = h("textarea", { name, rows: 3, class: "mono", placeholder: `${type} as JSON` });
      read = () => {
        if (!input.value.trim()) return undefined;
        try { return JSON.parse(input.value); } catch { throw new Error(`${name}: not valid JSON`); }
      };
    }
    const hint = prop.description && h("small", { class: "muted" }, prop.description);
    return { name, read, el: h("label", { class: "field" }, h("span", {}, label), input, hint) };
  });
  return {
    el: h("div", { class: "stack" }, fields.map((f) => f.el)),
    read() {
      const value = {};
      for (const field of fields) {
        const v = field.read();
        if (v === undefined) {
          if (required.has(field.name)) throw new Error(`${field.name} is required`);
        } else value[field.name] = v;
      }
      return value;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Start

async function checkServer() {
  try {
    const { status } = await api.call("grpc.health.v1.Health/Check");
    $("server").textContent = `● ${enumText(status, "") || "unknown"} · agentd ${state.config.version || ""}`;
  } catch (error) {
    $("server").textContent = `● unreachable (${error.message})`;
  }
}

async function start() {
  try {
    state.config = await (await fetch("/playground/config.json")).json();
  } catch {
    // An older or proxied server: assume no keys, a 401 will ask.
  }
  const params = new URLSearchParams(location.hash.slice(1));
  state.resource = params.get("resource") || localStorage.getItem("agentd.playground.resource") || "playground";
  $("resource").value = state.resource;
  $("key").value = api.key;
  if (state.config.authRequired) $("key-form").hidden = false;

  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    api.key = $("key").value.trim();
    sessionStorage.setItem(KEY_STORAGE, api.key);
    notice("");
    boot(params.get("agent"), state.thread || params.get("thread"));
  });
  $("agent").addEventListener("change", () => showAgent(state.agents.find((a) => a.id === $("agent").value)));
  $("resource").addEventListener("change", () => {
    state.resource = $("resource").value.trim() || "playground";
    $("resource").value = state.resource;
    newThread();
    loadThreads();
  });
  $("new-thread").addEventListener("click", newThread);
  // A link or an edited address naming another agent, resource or thread: start over from it.
  addEventListener("hashchange", () => location.reload());
  $("more-threads").addEventListener("click", () => loadThreads(true));
  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("abort").addEventListener("click", () => abortRun(state.run?.view.runId));
  $("abort-by-id").addEventListener("click", () => abortRun($("observe-run").value.trim()));
  $("observe-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const runId = $("observe-run").value.trim();
    if (runId) runStream("agentd.v1.AgentService/Observe", { runId, afterSequence: "0" }, { label: "observed" });
  });
  $("copy-trace").addEventListener("click", async () => {
    const id = $("trace-id").textContent;
    try {
      await navigator.clipboard.writeText(id);
      $("copy-trace").textContent = "Copied";
    } catch {
      getSelection().selectAllChildren($("trace-id"));
      $("copy-trace").textContent = "Selected";
    }
    setTimeout(() => { $("copy-trace").textContent = "Copy"; }, 1500);
  });

  if (state.config.authRequired && !api.key) {
    notice("This server requires an API key: enter it above.");
    $("key").focus();
    checkServer();
    return;
  }
  boot(params.get("agent"), params.get("thread"));
}

async function boot(agent, thread) {
  checkServer();
  try {
    await loadAgents(agent);
  } catch (error) {
    report(error, "Listing agents");
    return;
  }
  await loadThreads();
  if (thread) await openThread(thread);
  else newThread();
}

start();
