"""A Python client streams a Generate and approves a suspended run on a real agentd, with stubs
generated from proto/ (the model is the repo's mock-openai planner)."""

import uuid

import grpc
import pytest


def memory(s):
    return s.agent.MemoryOptions(
        thread=s.agent.ThreadRef(id=f"py-{uuid.uuid4().hex}"), resource=f"py-res-{uuid.uuid4().hex}"
    )


def kinds(chunks):
    return [c.WhichOneof("payload") for c in chunks]


def test_generate_streams_a_two_step_run(agent_stubs, stubs, channel):
    s = agent_stubs
    agents = s.agent_rpc.AgentServiceStub(channel)
    mem = memory(s)
    chunks = list(agents.Generate(s.agent.GenerateRequest(agent_id="planner", prompt="Write code, Test it", memory=mem)))
    order = [k for i, k in enumerate(kinds(chunks)) if i == 0 or kinds(chunks)[i - 1] != k]
    assert order[:2] == ["start", "step_start"]
    assert "tool_call" in order and "tool_result" in order and "data" in order
    assert order[-3:] == ["text_end", "step_finish", "finish"]
    assert [c.sequence for c in chunks] == list(range(1, len(chunks) + 1))
    result = chunks[-1].finish
    assert result.finish_reason == s.common.FINISH_REASON_STOP
    assert result.text == "Planned: Write code, Test it"
    assert len(result.steps) == 2

    tasks_pb2, tasks_rpc = stubs
    listed = tasks_rpc.TaskServiceStub(channel).Check(
        tasks_pb2.CheckRequest(thread_id=mem.thread.id, resource_id=mem.resource)
    )
    assert [(t.id, t.status) for t in listed.tasks] == [("task_write_code", tasks_pb2.TASK_STATUS_IN_PROGRESS), ("task_test_it", tasks_pb2.TASK_STATUS_PENDING)]


def test_approve_a_suspended_run(agent_stubs, stubs, channel):
    s = agent_stubs
    agents = s.agent_rpc.AgentServiceStub(channel)
    approvals = s.approval_rpc.ApprovalServiceStub(channel)
    mem = memory(s)
    chunks = list(agents.Generate(s.agent.GenerateRequest(agent_id="careful", prompt="Deploy, Verify", memory=mem)))
    assert "tool_call_approval" in kinds(chunks)
    suspended = chunks[-1].finish
    assert suspended.finish_reason == s.common.FINISH_REASON_SUSPENDED
    assert suspended.suspend_payload.tool_name == "task_write"

    pending = approvals.ListPending(s.approval.ListPendingRequest(thread_id=mem.thread.id))
    assert [p.run_id for p in pending.runs] == [suspended.run_id]

    rest = list(
        approvals.Approve(
            s.approval.ApproveRequest(run_id=suspended.run_id, tool_call_id=suspended.suspend_payload.tool_call_id)
        )
    )
    done = rest[-1].finish
    assert done.finish_reason == s.common.FINISH_REASON_STOP
    assert done.text == "Planned: Deploy, Verify"

    with pytest.raises(grpc.RpcError) as raised:
        list(
            approvals.Approve(
                s.approval.ApproveRequest(run_id=suspended.run_id, tool_call_id=suspended.suspend_payload.tool_call_id)
            )
        )
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    tasks_pb2, tasks_rpc = stubs
    listed = tasks_rpc.TaskServiceStub(channel).Check(
        tasks_pb2.CheckRequest(thread_id=mem.thread.id, resource_id=mem.resource)
    )
    assert [t.content for t in listed.tasks] == ["Deploy", "Verify"]


def test_unknown_agent_is_not_found(agent_stubs, channel):
    s = agent_stubs
    agents = s.agent_rpc.AgentServiceStub(channel)
    with pytest.raises(grpc.RpcError) as raised:
        list(agents.Generate(s.agent.GenerateRequest(agent_id="nobody", prompt="hi")))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
