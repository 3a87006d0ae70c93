"""Run an agent on agentd while this program answers its hooks (AgentService.GenerateWithHooks).

    python examples/python/hooks.py --server 127.0.0.1:50051 --agent planner "Write code, Test it"

Two hooks, as a Mastra agent would pass them to generate():
- before_tool_call: a policy. Tools named with --deny are skipped; the model reads the given
  output as the tool's result.
- on_iteration_complete: after the first iteration that called tools, feedback the model reads
  before its next call.

`HookClient` is reusable: give it one handler per hook kind (a function from the call's context
to an answer message, or None for "no change"). Stubs are generated from ../../proto on first
use (grpcio-tools), so the example needs nothing but `pip install grpcio grpcio-tools`.
"""

import argparse
import atexit
import importlib
import importlib.resources
import json
import pathlib
import queue
import shutil
import sys
import tempfile
import uuid

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_stubs():
    """Imports the agentd stubs, generating them from proto/ when they are not importable."""
    try:
        return importlib.import_module("agentd.v1.agent_pb2"), importlib.import_module("agentd.v1.agent_pb2_grpc")
    except ImportError:
        pass
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="agentd-stubs-")
    # Imported once generated: the files go when the example exits.
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    # agentd's own protos only: google/rpc is the standard's, which grpcio-status already ships.
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto" / "agentd").rglob("*.proto"))
    args = ["protoc", f"-I{ROOT / 'proto'}", f"-I{well_known}", f"--python_out={out}", f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out)
    return importlib.import_module("agentd.v1.agent_pb2"), importlib.import_module("agentd.v1.agent_pb2_grpc")


agent_pb2, agent_pb2_grpc = load_stubs()
hooks_pb2 = importlib.import_module("agentd.v1.hooks_pb2")
common_pb2 = importlib.import_module("agentd.v1.common_pb2")

# Hook kind -> (context field of HookCall, answer field of HookAnswer).
FIELDS = {
    hooks_pb2.HOOK_KIND_ON_ITERATION_COMPLETE: "on_iteration_complete",
    hooks_pb2.HOOK_KIND_BEFORE_TOOL_CALL: "before_tool_call",
    hooks_pb2.HOOK_KIND_AFTER_TOOL_CALL: "after_tool_call",
    hooks_pb2.HOOK_KIND_PREPARE_STEP: "prepare_step",
    hooks_pb2.HOOK_KIND_IS_TASK_COMPLETE: "is_task_complete",
}


class HookClient:
    """Runs GenerateWithHooks, answering each hook call with its kind's handler."""

    def __init__(self, channel, handlers, deadline_ms=5000):
        self.stub = agent_pb2_grpc.AgentServiceStub(channel)
        self.handlers = handlers  # {HookKind: callable(context) -> answer message or None}
        self.deadline_ms = deadline_ms
        self.calls = []  # (kind name, context) of every hook call, in order
        self.rejected = []

    def run(self, request):
        """Streams the run; returns (chunks, the GenerateResult of its finish chunk)."""
        outbox = queue.Queue()
        options = hooks_pb2.HookOptions(kinds=list(self.handlers), deadline_ms=self.deadline_ms)
        outbox.put(agent_pb2.GenerateWithHooksRequest(start=agent_pb2.HookedGenerate(request=request, hooks=options)))

        def requests():
            # The request stream stays open until the run ends: closing it means "gone".
            while True:
                message = outbox.get()
                if message is None:
                    return
                yield message

        chunks = []
        try:
            for event in self.stub.GenerateWithHooks(requests()):
                which = event.WhichOneof("event")
                if which == "chunk":
                    chunks.append(event.chunk)
                elif which == "hook_call":
                    outbox.put(agent_pb2.GenerateWithHooksRequest(answer=self.answer(event.hook_call)))
                elif which == "answer_rejected":
                    self.rejected.append(event.answer_rejected)
        finally:
            outbox.put(None)
        finish = chunks[-1].finish if chunks and chunks[-1].WhichOneof("payload") == "finish" else None
        return chunks, finish

    def answer(self, call):
        field = FIELDS[call.kind]
        context = getattr(call, field)
        self.calls.append((field, context))
        try:
            reply = self.handlers[call.kind](context)
        except Exception as e:  # a throwing hook, as the reference's throwing callback
            return hooks_pb2.HookAnswer(id=call.id, error=hooks_pb2.HookFailure(message=str(e)))
        if reply is None:
            return hooks_pb2.HookAnswer(id=call.id)
        return hooks_pb2.HookAnswer(id=call.id, **{field: reply})


def policy(denied):
    """before_tool_call: skip denied tools with an output the model reads."""

    def before_tool_call(ctx):
        if ctx.tool_name in denied:
            from google.protobuf import struct_pb2

            output = struct_pb2.Value(string_value=f"Tool {ctx.tool_name} is not allowed by policy")
            return hooks_pb2.BeforeToolCallAnswer(proceed=False, output=output)
        return None

    return before_tool_call


def feedback(text):
    """on_iteration_complete: feedback once, after the first iteration that called tools."""

    def on_iteration_complete(ctx):
        if ctx.iteration == 1 and len(ctx.tool_calls) > 0:
            return hooks_pb2.IterationAnswer(feedback=text)
        return None

    return on_iteration_complete


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--agent", default="planner")
    parser.add_argument("--deny", action="append", default=[], help="a tool the policy skips (repeatable)")
    parser.add_argument("--feedback", default="Check the task list once more before you answer.")
    parser.add_argument("--thread", default=None, help="memory thread (default: a new one)")
    parser.add_argument("--resource", default="example-user", help="memory resource")
    parser.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    args = parser.parse_args()

    with grpc.insecure_channel(args.server) as channel:
        client = HookClient(
            channel,
            {
                hooks_pb2.HOOK_KIND_BEFORE_TOOL_CALL: policy(set(args.deny)),
                hooks_pb2.HOOK_KIND_ON_ITERATION_COMPLETE: feedback(args.feedback),
            },
        )
        thread = args.thread or f"example-{uuid.uuid4().hex}"
        memory = agent_pb2.MemoryOptions(thread=agent_pb2.ThreadRef(id=thread), resource=args.resource)
        request = agent_pb2.GenerateRequest(agent_id=args.agent, prompt=args.prompt, memory=memory)
        chunks, result = client.run(request)
    if result is None:
        sys.exit("the run ended without a finish chunk")
    from google.protobuf import json_format

    results = [json_format.MessageToDict(r.result) for r in result.tool_results]
    if args.json:
        print(
            json.dumps(
                {
                    "text": result.text,
                    "finish_reason": common_pb2.FinishReason.Name(result.finish_reason),
                    "hooks": [kind for kind, _ in client.calls],
                    "tool_results": results,
                    "steps": len(result.steps),
                }
            )
        )
    else:
        for kind, _ in client.calls:
            print(f"hook: {kind}")
        print(result.text)


if __name__ == "__main__":
    main()
