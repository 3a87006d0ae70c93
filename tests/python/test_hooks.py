"""Hooks answered by a real Python client on a real agentd: the example program as a user runs
it (before_tool_call policy, on_iteration_complete feedback), and the example's HookClient
implementing the other hook kinds (after_tool_call, prepare_step, is_task_complete)."""

import json
import pathlib
import subprocess
import sys
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python" / "hooks.py"


def run_example(server_address, *args):
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--server", server_address, "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_example_policy_blocks_a_tool_and_feedback_is_given(server_address):
    summary = run_example(server_address, "--deny", "task_write", "Write code, Test it")
    assert summary["finish_reason"] == "FINISH_REASON_STOP"
    assert summary["tool_results"] == ["Tool task_write is not allowed by policy"]
    assert summary["hooks"] == ["before_tool_call", "on_iteration_complete", "on_iteration_complete"]
    assert summary["text"] == "Planned: Write code, Test it"


def test_example_allows_what_the_policy_does_not_deny(server_address):
    summary = run_example(server_address, "Write code, Test it")
    assert summary["tool_results"][0]["tasks"][0]["content"] == "Write code"
    assert summary["steps"] == 2


@pytest.fixture()
def example(stubs):
    sys.path.insert(0, str(EXAMPLE.parent))
    import hooks  # noqa: E402

    return hooks


def test_a_python_client_answers_every_other_hook_kind(example, channel):
    h = example.hooks_pb2
    from google.protobuf import struct_pb2

    def after_tool_call(ctx):
        assert ctx.tool_name == "task_write" and ctx.HasField("output")
        return h.AfterToolCallAnswer(output=struct_pb2.Value(string_value="list saved"))

    steps = []

    def prepare_step(ctx):
        steps.append(ctx.step_number)
        return None

    def is_task_complete(ctx):
        assert ctx.original_task == "Write code, Test it"
        return h.ScoreAnswer(score=1, reason="planned")

    client = example.HookClient(
        channel,
        {
            h.HOOK_KIND_AFTER_TOOL_CALL: after_tool_call,
            h.HOOK_KIND_PREPARE_STEP: prepare_step,
            h.HOOK_KIND_IS_TASK_COMPLETE: is_task_complete,
        },
    )
    scorers = h.IsTaskComplete(scorers=[h.CompletionScorer(id="planned", hook=h.HookScorer())])
    memory = example.agent_pb2.MemoryOptions(thread=example.agent_pb2.ThreadRef(id=f"py-hooks-{uuid.uuid4().hex}"), resource="py-hooks")
    request = example.agent_pb2.GenerateRequest(agent_id="planner", prompt="Write code, Test it", is_task_complete=scorers, memory=memory)
    chunks, result = client.run(request)
    assert result is not None and not client.rejected
    assert steps == [0, 1]
    assert result.tool_results[0].result.string_value == "list saved"
    assert result.completion_check.passed
    assert [r.reason for r in result.completion_check.results] == ["planned"]
    kinds = [c.WhichOneof("payload") for c in chunks]
    assert "is_task_complete" in kinds


def test_a_throwing_python_hook_is_a_tool_error_the_model_reads(example, channel):
    h = example.hooks_pb2

    def before_tool_call(ctx):
        raise RuntimeError("policy service unavailable")

    client = example.HookClient(channel, {h.HOOK_KIND_BEFORE_TOOL_CALL: before_tool_call})
    chunks, result = client.run(example.agent_pb2.GenerateRequest(agent_id="planner", prompt="A, B"))
    errors = [c.tool_error.error for c in chunks if c.WhichOneof("payload") == "tool_error"]
    assert errors == ["policy service unavailable"]
    assert result.text == "Planned: A, B"


def test_the_example_policy_webhook_skips_a_denied_tool(agent_stubs, channel):
    s = agent_stubs
    agents = s.agent_rpc.AgentServiceStub(channel)
    memory = s.agent.MemoryOptions(thread=s.agent.ThreadRef(id=f"py-webhook-{uuid.uuid4().hex}"), resource="py-webhook")
    chunks = list(agents.Generate(s.agent.GenerateRequest(agent_id="policed", prompt="Write code, Test it", memory=memory)))
    result = chunks[-1].finish
    assert [r.result.string_value for r in result.tool_results] == ["Tool task_write is not allowed by policy"]
    assert result.text == "Planned: Write code, Test it"
