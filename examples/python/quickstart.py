"""A first agentd client: stream a run, approve the tool call it waits for, read the task list.

    python examples/python/quickstart.py --server 127.0.0.1:50051 --agent careful "Write code, Test it"

The server address also comes from AGENTD_SERVER, and the API key (if the server wants one)
from AGENTD_API_KEY. What it does, in order:
1. AgentService.Generate: prints the reply's text as it streams, and each tool call and result.
2. When the run suspends on a call that needs approval: ApprovalService.Approve (or Decline,
   with --decline REASON), then streams the continued run the same way.
3. TaskService.Check: prints the thread's task list and its progress.

Stubs are generated from ../../proto on first use (grpcio-tools), so the example needs nothing
but `pip install grpcio grpcio-tools`.
"""

import argparse
import atexit
import importlib
import importlib.resources
import json
import os
import pathlib
import shutil
import sys
import tempfile
import uuid

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_stubs():
    """Imports the agentd stubs, generating them from proto/ when they are not importable."""
    names = ["agent_pb2", "agent_pb2_grpc", "approval_pb2", "approval_pb2_grpc", "tasks_pb2", "tasks_pb2_grpc", "common_pb2"]
    try:
        return [importlib.import_module(f"agentd.v1.{n}") for n in names]
    except ImportError:
        pass
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="agentd-stubs-")
    # Imported once generated: the files go when the example exits.
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto" / "agentd").rglob("*.proto"))
    args = ["protoc", f"-I{ROOT / 'proto'}", f"-I{well_known}", f"--python_out={out}", f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out)
    return [importlib.import_module(f"agentd.v1.{n}") for n in names]


agent_pb2, agent_grpc, approval_pb2, approval_grpc, tasks_pb2, tasks_grpc, common_pb2 = load_stubs()

from google.protobuf import json_format  # noqa: E402  (after the stubs: same protobuf runtime)


def as_json(value):
    """A google.protobuf.Value as compact JSON text (keys sorted: protobuf maps have no order)."""
    return json.dumps(json_format.MessageToDict(value), separators=(",", ":"), sort_keys=True)


def follow(chunks):
    """Prints a run's chunks as they arrive; returns the result of its (last) finish chunk."""
    result = None
    for chunk in chunks:
        kind = chunk.WhichOneof("payload")
        if kind == "text_delta":
            print(chunk.text_delta.text, end="", flush=True)
        elif kind == "text_end":
            print()
        elif kind == "tool_call":
            print(f"-> {chunk.tool_call.tool_name}({as_json(chunk.tool_call.args)})")
        elif kind == "tool_result":
            print(f"<- {chunk.tool_result.tool_name}")
        elif kind == "tool_output_denied":
            print(f"x {chunk.tool_output_denied.tool_name} declined: {chunk.tool_output_denied.reason}")
        elif kind == "tool_call_approval":
            waiting = chunk.tool_call_approval
            print(f"|| {waiting.tool_name} waits for approval (tool call {waiting.tool_call_id})")
        elif kind == "finish":
            result = chunk.finish
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("AGENTD_SERVER", "127.0.0.1:50051"))
    parser.add_argument("--agent", default="careful")
    parser.add_argument("--thread", default=f"quickstart-{uuid.uuid4().hex[:12]}")
    parser.add_argument("--resource", default="quickstart")
    parser.add_argument("--decline", metavar="REASON", help="decline the waiting call instead of approving it")
    parser.add_argument("prompt", nargs="?", default="Write the spec, Build it, Ship it")
    args = parser.parse_args()

    key = os.environ.get("AGENTD_API_KEY")
    metadata = [("authorization", f"Bearer {key}")] if key else []
    server = args.server.removeprefix("http://")
    with grpc.insecure_channel(server) as channel:
        agents = agent_grpc.AgentServiceStub(channel)
        approvals = approval_grpc.ApprovalServiceStub(channel)
        tasks = tasks_grpc.TaskServiceStub(channel)

        request = agent_pb2.GenerateRequest(
            agent_id=args.agent,
            prompt=args.prompt,
            memory=agent_pb2.MemoryOptions(thread=agent_pb2.ThreadRef(id=args.thread), resource=args.resource),
        )
        print(f"run on thread {args.thread}")
        result = follow(agents.Generate(request, metadata=metadata))

        # A call that needs a human's decision suspends the run; the decision continues it (on
        # any replica, even after a restart) and streams the rest.
        while result is not None and result.finish_reason == common_pb2.FINISH_REASON_SUSPENDED:
            waiting = result.suspend_payload
            if args.decline:
                print(f"declining {waiting.tool_name}: {args.decline}")
                decision = approval_pb2.DeclineRequest(run_id=result.run_id, tool_call_id=waiting.tool_call_id, reason=args.decline)
                result = follow(approvals.Decline(decision, metadata=metadata))
            else:
                print(f"approving {waiting.tool_name}")
                decision = approval_pb2.ApproveRequest(run_id=result.run_id, tool_call_id=waiting.tool_call_id)
                result = follow(approvals.Approve(decision, metadata=metadata))
        if result is None:
            sys.exit("the stream ended without a result")
        print(f"finished: {common_pb2.FinishReason.Name(result.finish_reason)}, {len(result.steps)} steps")

        listed = tasks.Check(tasks_pb2.CheckRequest(thread_id=args.thread, resource_id=args.resource), metadata=metadata)
        marks = {tasks_pb2.TASK_STATUS_COMPLETED: "[x]", tasks_pb2.TASK_STATUS_IN_PROGRESS: "[~]"}
        print(f"tasks: {listed.summary.completed}/{listed.summary.total} done")
        for task in listed.tasks:
            print(f"  {marks.get(task.status, '[ ]')} {task.content}")


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as error:
        sys.exit(f"agentd: {error.code().name}: {error.details()}")
