"""A Python client drives TaskService on a real agentd, with stubs generated from proto/."""

import uuid

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status


def thread():
    return f"py-thread-{uuid.uuid4().hex}", f"py-resource-{uuid.uuid4().hex}"


def test_write_update_complete_check(stubs, channel):
    pb, rpc = stubs
    client = rpc.TaskServiceStub(channel)
    thread_id, resource_id = thread()
    written = client.Write(
        pb.WriteRequest(
            thread_id=thread_id,
            resource_id=resource_id,
            tasks=[
                pb.TaskInput(content="Alpha", status=pb.TASK_STATUS_IN_PROGRESS, active_form="Doing Alpha"),
                pb.TaskInput(content="Beta", status=pb.TASK_STATUS_PENDING, active_form="Doing Beta"),
            ],
        )
    )
    assert not written.is_error
    assert [t.id for t in written.tasks] == ["task_alpha", "task_beta"]
    assert written.content == (
        "Tasks updated: [0/2 completed]\nCurrently: Doing Alpha (task_alpha)\n"
        "Task IDs:\n- task_alpha: Alpha (in_progress)\n- task_beta: Beta (pending)"
    )

    updated = client.Update(pb.UpdateRequest(thread_id=thread_id, resource_id=resource_id, id="task_beta", status=pb.TASK_STATUS_IN_PROGRESS))
    assert [t.status for t in updated.tasks] == [pb.TASK_STATUS_PENDING, pb.TASK_STATUS_IN_PROGRESS], "the other in_progress task is demoted"

    done = client.Complete(pb.CompleteRequest(thread_id=thread_id, resource_id=resource_id, id="task_beta"))
    assert done.tasks[1].status == pb.TASK_STATUS_COMPLETED

    check = client.Check(pb.CheckRequest(thread_id=thread_id, resource_id=resource_id))
    assert check.summary.total == 2 and check.summary.completed == 1
    assert not check.summary.all_completed
    assert [t.id for t in check.incomplete_tasks] == ["task_alpha"]


def test_domain_errors_are_ok_responses(stubs, channel):
    pb, rpc = stubs
    client = rpc.TaskServiceStub(channel)
    thread_id, resource_id = thread()
    missing = client.Complete(pb.CompleteRequest(thread_id=thread_id, resource_id=resource_id, id="nope"))
    assert missing.is_error
    assert missing.error_code == pb.TASK_ERROR_CODE_TASK_NOT_FOUND
    assert missing.content == "Task not found: nope\n\nNo tasks are currently tracked."

    no_memory = client.Check(pb.CheckRequest())
    assert no_memory.is_error and no_memory.error_code == pb.TASK_ERROR_CODE_MEMORY_REQUIRED


def test_malformed_request_is_invalid_argument_with_field_violation(stubs, channel):
    pb, rpc = stubs
    client = rpc.TaskServiceStub(channel)
    thread_id, resource_id = thread()
    with pytest.raises(grpc.RpcError) as raised:
        client.Write(
            pb.WriteRequest(
                thread_id=thread_id,
                resource_id=resource_id,
                tasks=[pb.TaskInput(content="x", status=pb.TASK_STATUS_UNSPECIFIED, active_form="y")],
            )
        )
    err = raised.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(err)
    assert status is not None, "rich error details are attached"
    bad_request = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad_request)
    assert [v.field for v in bad_request.field_violations] == ["tasks.0.status"]
    listed = client.Check(pb.CheckRequest(thread_id=thread_id, resource_id=resource_id))
    assert listed.summary.total == 0, "nothing was written"


def test_thread_of_another_resource_is_permission_denied(stubs, channel):
    pb, rpc = stubs
    client = rpc.TaskServiceStub(channel)
    thread_id, resource_id = thread()
    client.Write(
        pb.WriteRequest(
            thread_id=thread_id,
            resource_id=resource_id,
            tasks=[pb.TaskInput(content="Mine", status=pb.TASK_STATUS_PENDING, active_form="Owning")],
        )
    )
    with pytest.raises(grpc.RpcError) as raised:
        client.Check(pb.CheckRequest(thread_id=thread_id, resource_id="someone-else"))
    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_watch_streams_changes(stubs, channel):
    pb, rpc = stubs
    client = rpc.TaskServiceStub(channel)
    thread_id, resource_id = thread()
    stream = client.Watch(pb.WatchRequest(thread_id=thread_id, resource_id=resource_id), timeout=10)
    first = next(stream)
    assert first.version == 0 and len(first.tasks) == 0
    client.Write(
        pb.WriteRequest(
            thread_id=thread_id,
            resource_id=resource_id,
            tasks=[pb.TaskInput(content="Watched", status=pb.TASK_STATUS_PENDING, active_form="Watching")],
        )
    )
    second = next(stream)
    assert [t.content for t in second.tasks] == ["Watched"]
    stream.cancel()
