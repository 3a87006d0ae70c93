// A first agentd client in TypeScript: stream a run, approve the tool call it waits for, read
// the task list. The protos are loaded at run time from ../../proto (no generated code).
//
//   npm start -- --server 127.0.0.1:50051 --agent careful "Write code, Test it"
//
// The server address also comes from AGENTD_SERVER, the API key (if the server wants one) from
// AGENTD_API_KEY. `--decline REASON` declines the waiting call instead of approving it.

import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

// The few message shapes this example reads, as proto-loader decodes them with the options
// below (proto field names, enums as their names, the set oneof field named by `payload`).
interface ProtoValue {
  kind?: string;
  nullValue?: string;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: { fields: Record<string, ProtoValue> };
  listValue?: { values: ProtoValue[] };
}
interface ToolSuspension {
  tool_call_id: string;
  tool_name: string;
  args: ProtoValue | null;
}
interface GenerateResult {
  run_id: string;
  finish_reason: string;
  steps: unknown[];
  suspend_payload: ToolSuspension | null;
}
interface Chunk {
  payload: string;
  text_delta?: { text: string };
  tool_call?: { tool_name: string; args: ProtoValue | null };
  tool_result?: { tool_name: string };
  tool_output_denied?: { tool_name: string; reason: string };
  tool_call_approval?: ToolSuspension;
  finish?: GenerateResult;
}
interface Task {
  content: string;
  /** The TaskStatus enum by name (`enums: String` below). */
  status: "TASK_STATUS_PENDING" | "TASK_STATUS_IN_PROGRESS" | "TASK_STATUS_COMPLETED";
}
interface CheckResult {
  tasks: Task[];
  summary: { total: number; completed: number };
}
type Unary<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  callback: (error: grpc.ServiceError | null, response?: Res) => void,
) => void;
type ServerStream<Req> = (request: Req, metadata: grpc.Metadata) => grpc.ClientReadableStream<Chunk>;
interface Stubs {
  agents: { Generate: ServerStream<object> };
  approvals: { Approve: ServerStream<object>; Decline: ServerStream<object> };
  tasks: { Check: Unary<object, CheckResult> };
}

/** Connects the three services, with the protos read from proto/agentd/v1. */
function connect(server: string): Stubs {
  const definition = protoLoader.loadSync(
    ["agentd/v1/agent.proto", "agentd/v1/approval.proto", "agentd/v1/tasks.proto"],
    { includeDirs: [path.join(ROOT, "proto")], keepCase: true, enums: String, longs: Number, defaults: true, oneofs: true },
  );
  // The loaded package is untyped: one cast here, typed use everywhere below.
  const v1 = (grpc.loadPackageDefinition(definition) as any).agentd.v1;
  const credentials = grpc.credentials.createInsecure();
  return {
    agents: new v1.AgentService(server, credentials),
    approvals: new v1.ApprovalService(server, credentials),
    tasks: new v1.TaskService(server, credentials),
  };
}

/** A google.protobuf.Value as plain JSON. */
function fromValue(value: ProtoValue | null | undefined): unknown {
  switch (value?.kind) {
    case "structValue":
      return Object.fromEntries(Object.entries(value.structValue?.fields ?? {}).map(([k, v]) => [k, fromValue(v)]));
    case "listValue":
      return (value.listValue?.values ?? []).map(fromValue);
    case "numberValue":
      return value.numberValue;
    case "stringValue":
      return value.stringValue;
    case "boolValue":
      return value.boolValue;
    default:
      return null;
  }
}

/** Prints a run's chunks as they arrive; resolves with the result of its (last) finish chunk. */
function follow(stream: grpc.ClientReadableStream<Chunk>): Promise<GenerateResult> {
  return new Promise((resolve, reject) => {
    let result: GenerateResult | undefined;
    stream.on("data", (chunk: Chunk) => {
      switch (chunk.payload) {
        case "text_delta":
          process.stdout.write(chunk.text_delta!.text);
          break;
        case "text_end":
          process.stdout.write("\n");
          break;
        case "tool_call":
          console.log(`-> ${chunk.tool_call!.tool_name}(${JSON.stringify(fromValue(chunk.tool_call!.args))})`);
          break;
        case "tool_result":
          console.log(`<- ${chunk.tool_result!.tool_name}`);
          break;
        case "tool_output_denied":
          console.log(`x ${chunk.tool_output_denied!.tool_name} declined: ${chunk.tool_output_denied!.reason}`);
          break;
        case "tool_call_approval": {
          const waiting = chunk.tool_call_approval!;
          console.log(`|| ${waiting.tool_name} waits for approval (tool call ${waiting.tool_call_id})`);
          break;
        }
        case "finish":
          result = chunk.finish;
          break;
      }
    });
    stream.on("error", reject);
    stream.on("end", () => (result ? resolve(result) : reject(new Error("the stream ended without a result"))));
  });
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      server: { type: "string", default: process.env.AGENTD_SERVER ?? "127.0.0.1:50051" },
      agent: { type: "string", default: "careful" },
      thread: { type: "string", default: `quickstart-${randomUUID().replaceAll("-", "").slice(0, 12)}` },
      resource: { type: "string", default: "quickstart" },
      decline: { type: "string" },
    },
  });
  const prompt = positionals[0] ?? "Write the spec, Build it, Ship it";
  const thread = values.thread!;
  const resource = values.resource!;
  const metadata = new grpc.Metadata();
  if (process.env.AGENTD_API_KEY) {
    metadata.set("authorization", `Bearer ${process.env.AGENTD_API_KEY}`);
  }
  const { agents, approvals, tasks } = connect(values.server!.replace(/^http:\/\//, ""));

  console.log(`run on thread ${thread}`);
  let result = await follow(
    agents.Generate({ agent_id: values.agent, prompt, memory: { thread: { id: thread }, resource } }, metadata),
  );
  // A call that needs a human's decision suspends the run; the decision continues it (on any
  // replica, even after a restart) and streams the rest.
  while (result.finish_reason === "FINISH_REASON_SUSPENDED" && result.suspend_payload) {
    const waiting = result.suspend_payload;
    const decision = { run_id: result.run_id, tool_call_id: waiting.tool_call_id };
    if (values.decline !== undefined) {
      console.log(`declining ${waiting.tool_name}: ${values.decline}`);
      result = await follow(approvals.Decline({ ...decision, reason: values.decline }, metadata));
    } else {
      console.log(`approving ${waiting.tool_name}`);
      result = await follow(approvals.Approve(decision, metadata));
    }
  }
  console.log(`finished: ${result.finish_reason}, ${result.steps.length} steps`);

  const listed = await new Promise<CheckResult>((resolve, reject) =>
    tasks.Check({ thread_id: thread, resource_id: resource }, metadata, (error, response) =>
      error || !response ? reject(error) : resolve(response),
    ),
  );
  const marks: Record<string, string> = { TASK_STATUS_COMPLETED: "[x]", TASK_STATUS_IN_PROGRESS: "[~]" };
  console.log(`tasks: ${listed.summary.completed}/${listed.summary.total} done`);
  for (const task of listed.tasks) {
    console.log(`  ${marks[task.status] ?? "[ ]"} ${task.content}`);
  }
}

main().then(
  () => process.exit(0),
  (error: grpc.ServiceError | Error) => {
    const code = "code" in error ? `${grpc.status[error.code]}: ` : "";
    const message = "details" in error ? error.details : error.message;
    console.error(`agentd: ${code}${message}`);
    process.exit(1);
  },
);
