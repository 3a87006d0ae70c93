"""The agentd command-line client, driven as a person drives it: through a pseudo-terminal
(pexpect) for `chat` and `tasks watch`, with pipes for the one-shot commands, against the real
binary serving with an API key on the mock `worker` model (it writes the prompt's items as
tasks, completes one per step, then answers `Done: …`; declined: `Stopped: <reason>`)."""

import os
import signal
import re
import subprocess
import time
import uuid

import pexpect
import pytest

from conftest import API_KEY, AUTH, binary, free_port

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def cli_env(server, key=API_KEY, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_") and k != "NO_COLOR"}
    env.update(AGENTD_SERVER=server, TERM="xterm", **extra)
    if key is not None:
        env["AGENTD_API_KEY"] = key
    return env


def _interrupts_as_in_a_terminal():
    # Ctrl-C must reach the CLI as it does a user's, also when this suite runs as a shell's
    # background job (which starts with SIGINT ignored, and children inherit that).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(server, *args, **env):
    child = pexpect.spawn(
        binary("agentd"), list(args), env=cli_env(server, **env), encoding="utf-8", timeout=20,
        preexec_fn=_interrupts_as_in_a_terminal,
    )
    child.setwinsize(40, 200)
    return child


def run_cli(server, *args, key=API_KEY):
    """A one-shot command with pipes (not a terminal: no colours, ASCII glyphs)."""
    out = subprocess.run([binary("agentd"), *args], env=cli_env(server, key=key), capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


def finish(child):
    """Ends the chat (Ctrl-D) and returns its exit status."""
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def test_chat_streams_the_reply_tool_calls_and_the_task_list_filling_and_ticking(keyed_server):
    child = spawn(keyed_server, "chat", "worker", NO_COLOR="1")
    child.expect(r"Chatting with Worker \(mock/worker\) · thread (cli-[0-9a-f]+) · resource cli")
    child.expect("> ")
    child.sendline("Write code, Test it")
    child.expect(r"→ task_write\(\{\"tasks\":\[")
    child.expect(r"Tasks 0/2 done\r\n  ◐ Working on Write code\r\n  ☐ Test it")
    child.expect(r"→ task_complete\(\{\"id\":\"task_write_code\"\}\)")
    child.expect(r"Tasks 1/2 done\r\n  ☑ Write code\r\n  ☐ Test it")
    child.expect(r"Tasks 2/2 done\r\n  ☑ Write code\r\n  ☑ Test it")
    child.expect(r"Done: Write code, Test it\r\n\[stop · 4 steps · \d+ tokens\]")
    child.expect("> ")
    transcript = child.before
    assert not ANSI.search(transcript), "NO_COLOR: no escape codes"
    assert finish(child) == 0


def test_chat_prints_the_answer_while_it_streams(keyed_server):
    child = spawn(keyed_server, "chat", "slow", NO_COLOR="1")
    child.expect("> ")
    child.sendline("Tidy up")
    child.expect(r"\r\nDone: ")
    shown = time.monotonic()
    child.expect(r"Tidy up\r\n\[stop · ")
    # The rest of the answer came word by word (150 ms each) after its first word was shown.
    assert time.monotonic() - shown >= 0.2
    child.expect("> ")
    assert finish(child) == 0


def test_ctrl_c_in_chat_stops_the_run_in_progress(keyed_server):
    child = spawn(keyed_server, "chat", "slow", NO_COLOR="1")
    child.expect("> ")
    child.sendline("Write the long report, Send it out")
    child.expect(r"run ([0-9a-f]{32})")
    run_id = child.match.group(1)
    child.expect(r"\r\nDone: ")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == 2
    # The chat's stream was the run's only client (ON_DISCONNECT_ABORT): the run stopped.
    deadline = time.monotonic() + 10
    while True:
        code, out, err = run_cli(keyed_server, "runs", "observe", run_id)
        if "[aborted · " in out or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert code == 0, err
    assert "aborted: The client disconnected" in out and "Done: Write the long report" not in out


def test_chat_asks_for_approvals_and_a_reason_on_decline(keyed_server, agent_stubs, keyed_channel):
    thread = f"cli-{uuid.uuid4().hex}"
    child = spawn(keyed_server, "chat", "careful", "--thread", thread, "--resource", "carol")
    child.expect("> ")
    child.sendline("Deploy, Verify")
    child.expect(re.escape('Approve task_write({"tasks":[{"activeForm":"Working on Deploy","content":"Deploy",'))
    child.expect(r"\? \[y/n\] ")
    child.sendline("maybe")
    child.expect("Please answer y or n.")
    child.expect(r"\[y/n\] ")
    child.sendline("y")
    child.expect(re.escape("\x1b[1mTasks\x1b[0m 0/2 done"))  # a terminal gets colours
    child.expect("Done: Deploy, Verify")
    child.expect("> ")

    child.sendline("Rollback")
    child.expect(r"run ([0-9a-f]{32})")
    declined_run = child.match.group(1)
    child.expect(r"\[y/n\] ")
    child.sendline("n")
    child.expect(r"Reason \(optional\): ")
    child.sendline("not on a Friday")
    child.expect("✗ task_write declined: not on a Friday")
    child.expect("Stopped: not on a Friday")
    child.expect("> ")
    assert finish(child) == 0

    # The run itself shows the decline: its replayed log, and the result's declined step.
    code, out, err = run_cli(keyed_server, "runs", "observe", declined_run)
    assert code == 0, err
    assert f"run {declined_run} · agent careful · thread {thread}" in out
    assert "|| task_write(" in out and "waits for approval" in out
    assert "x task_write declined: not on a Friday" in out
    assert out.rstrip().splitlines()[-2:][0] == "Stopped: not on a Friday"
    s = agent_stubs
    chunks = list(s.agent_rpc.AgentServiceStub(keyed_channel).Observe(s.agent.ObserveRequest(run_id=declined_run), metadata=AUTH))
    denied = [c.tool_output_denied for c in chunks if c.WhichOneof("payload") == "tool_output_denied"]
    assert [d.reason for d in denied] == ["not on a Friday"]


def test_chat_left_at_an_approval_keeps_the_run_for_later(keyed_server):
    child = spawn(keyed_server, "chat", "careful", "--resource", "dave")
    child.expect("> ")
    child.sendline("Migrate")
    child.expect(r"run ([0-9a-f]{32})")
    run_id = child.match.group(1)
    child.expect(r"\[y/n\] ")
    child.sendeof()
    child.expect(f"Run {run_id} stays suspended; decide later with `agentd approvals approve {run_id}`")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    code, out, _ = run_cli(keyed_server, "approvals", "list", "--run", run_id)
    assert code == 0 and f"run {run_id} · agent careful" in out


def suspended_run(s, channel, resource, prompt, agent="careful"):
    """A run of `agent` waiting for approval of its task_write (started with the stubs)."""
    thread = f"cli-{uuid.uuid4().hex}"
    request = s.agent.GenerateRequest(
        agent_id=agent, prompt=prompt, memory=s.agent.MemoryOptions(thread=s.agent.ThreadRef(id=thread), resource=resource)
    )
    chunks = list(s.agent_rpc.AgentServiceStub(channel).Generate(request, metadata=AUTH))
    result = chunks[-1].finish
    assert result.finish_reason == s.common.FINISH_REASON_SUSPENDED
    return result.run_id, result.suspend_payload.tool_call_id


def test_approvals_list_approve_and_decline(keyed_server, agent_stubs, keyed_channel):
    s = agent_stubs
    resource = f"erin-{uuid.uuid4().hex[:8]}"
    first, first_call = suspended_run(s, keyed_channel, resource, "Build, Ship")
    second, _ = suspended_run(s, keyed_channel, resource, "Delete everything")

    code, out, err = run_cli(keyed_server, "approvals", "list", "--resource", resource)
    assert code == 0, err
    assert f"run {first} · agent careful" in out and f"run {second} · agent careful" in out
    assert f"|| task_write(" in out and f"waits for approval · tool call {first_call}" in out
    assert re.search(r"expires in 2[34]h \d+m", out)

    code, out, err = run_cli(keyed_server, "approvals", "approve", first, "--tool-call-id", first_call)
    assert code == 0, err
    assert "Tasks 2/2 done" in out and "[x] Ship" in out
    assert "Done: Build, Ship" in out

    code, out, err = run_cli(keyed_server, "approvals", "decline", second, "--reason", "no budget")
    assert code == 0, err
    assert "x task_write declined: no budget" in out and "Stopped: no budget" in out

    code, out, _ = run_cli(keyed_server, "approvals", "list", "--resource", resource)
    assert (code, out.strip()) == (0, "No calls wait for a decision.")
    pending = s.approval_rpc.ApprovalServiceStub(keyed_channel).ListPending(s.approval.ListPendingRequest(resource_id=resource), metadata=AUTH)
    assert list(pending.runs) == []

    # Deciding again: the call no longer waits.
    code, _, err = run_cli(keyed_server, "approvals", "approve", first)
    assert code == 5 and f"run {first} has no call waiting for a decision" in err
    code, _, err = run_cli(keyed_server, "approvals", "list")
    assert code == 2 and "needs --resource, --thread or --run" in err


def test_an_approval_interrupted_while_following_lets_the_run_go_on(keyed_server, agent_stubs, keyed_channel):
    run_id, _ = suspended_run(agent_stubs, keyed_channel, "ivan", "Write the long report, Send it out", agent="slow-careful")
    child = spawn(keyed_server, "approvals", "approve", run_id, NO_COLOR="1")
    child.expect(r"\r\nDone: ")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == 2
    deadline = time.monotonic() + 10
    while True:
        code, out, err = run_cli(keyed_server, "runs", "observe", run_id)
        if "[stop · " in out or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert code == 0, err
    assert "Done: Write the long report, Send it out" in out and "aborted" not in out


def test_runs_observe_reattaches_to_a_run(keyed_server, agent_stubs, keyed_channel):
    s = agent_stubs
    run_id, call_id = suspended_run(s, keyed_channel, "frank", "Plan, Do")
    code, out, err = run_cli(keyed_server, "runs", "observe", run_id)
    assert code == 0, err
    assert out.rstrip().endswith("[suspended · 0 steps · 0 tokens]")
    approvals = s.approval_rpc.ApprovalServiceStub(keyed_channel)
    list(approvals.Approve(s.approval.ApproveRequest(run_id=run_id, tool_call_id=call_id), metadata=AUTH))
    code, out, err = run_cli(keyed_server, "runs", "observe", run_id)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"run {run_id} · agent careful · thread cli-")
    assert "[suspended · 0 steps · 0 tokens]" in lines
    assert "Done: Plan, Do" in lines and lines[-1].startswith("[stop · ")
    # After a sequence number: only what followed it.
    code, tail, _ = run_cli(keyed_server, "runs", "observe", run_id, "--after", "3")
    assert code == 0 and not tail.startswith("run ") and "Done: Plan, Do" in tail


def test_runs_scores_lists_a_run_s_and_an_agent_s_scores(keyed_server, agent_stubs, keyed_channel):
    s = agent_stubs
    agents = s.agent_rpc.AgentServiceStub(keyed_channel)
    run_id = f"scored-{uuid.uuid4().hex}"
    request = s.agent.GenerateRequest(agent_id="scored", prompt="Plan, Do", run_id=run_id, return_scorer_data=True)
    chunks = list(agents.Generate(request, metadata=AUTH))
    result = chunks[-1].finish
    assert [score.scorer_key for score in result.scores] == ["tone"]
    code, out, err = run_cli(keyed_server, "runs", "scores", "--run", run_id)
    assert code == 0, err
    assert out.splitlines() == [f"{result.scores[0].score:.4f} tone (tone-scorer) · run {run_id}"]
    code, out, err = run_cli(keyed_server, "runs", "scores", "--agent", "scored")
    assert code == 0 and f"tone (tone-scorer) · run {run_id}" in out, err
    code, out, _ = run_cli(keyed_server, "runs", "scores", "--run", "no-such-run")
    assert (code, out.strip()) == (0, "No scores.")
    code, _, err = run_cli(keyed_server, "runs", "scores")
    assert code == 2 and "needs --run, --thread (with --resource) or --agent" in err


def test_runs_observe_follows_a_live_run_started_elsewhere(keyed_server, agent_stubs, keyed_channel):
    s = agent_stubs
    request = s.agent.GenerateRequest(
        agent_id="slow",
        prompt="Write the long report, Send it out",
        on_disconnect=s.common.ON_DISCONNECT_CONTINUE,
        memory=s.agent.MemoryOptions(thread=s.agent.ThreadRef(id=f"cli-{uuid.uuid4().hex}"), resource="heidi"),
    )
    call = s.agent_rpc.AgentServiceStub(keyed_channel).Generate(request, metadata=AUTH)
    run_id = next(call).run_id
    call.cancel()  # the starter goes away; the run goes on (ON_DISCONNECT_CONTINUE)

    child = spawn(keyed_server, "runs", "observe", run_id, NO_COLOR="1")
    child.expect(f"run {run_id} · agent slow · thread cli-")
    attached = time.monotonic()
    child.expect(r"Tasks 2/2 done")
    child.expect(r"Done: Write the long report, Send it out\r\n\[stop · 4 steps · ")
    # Seven words at 150 ms: followed live, not replayed from a finished log.
    assert time.monotonic() - attached >= 0.4
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_tasks_watch_shows_a_live_checklist_with_progress(keyed_server, stubs, keyed_channel):
    tasks_pb2, tasks_rpc = stubs
    tasks = tasks_rpc.TaskServiceStub(keyed_channel)
    thread, resource = f"cli-{uuid.uuid4().hex}", "grace"
    child = spawn(keyed_server, "tasks", "watch", thread, "--resource", resource, "--until-done")
    child.expect(f"Tasks of {thread}:.* no tasks yet")

    task = tasks_pb2.TaskInput
    tasks.Write(
        tasks_pb2.WriteRequest(
            thread_id=thread,
            resource_id=resource,
            tasks=[
                task(content="Fix the bug", status=tasks_pb2.TASK_STATUS_IN_PROGRESS, active_form="Fixing the bug"),
                task(content="Add a test", status=tasks_pb2.TASK_STATUS_PENDING, active_form="Adding a test"),
            ],
        ),
        metadata=AUTH,
    )
    child.expect(r"0/2 done")
    child.expect(r"◐.*Fixing the bug")
    child.expect(r"☐ Add a test")
    tasks.Complete(tasks_pb2.CompleteRequest(thread_id=thread, resource_id=resource, id="task_fix_the_bug"), metadata=AUTH)
    # Redrawn in place: up three lines (the last drawing), clear, draw again unwrapped.
    child.expect(re.escape("\x1b[3F\x1b[J\x1b[?7l"))
    child.expect(r"1/2 done")
    child.expect(r"☑.*Fix the bug")
    tasks.Complete(tasks_pb2.CompleteRequest(thread_id=thread, resource_id=resource, id="task_add_a_test"), metadata=AUTH)
    child.expect(r"2/2 done")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, "--until-done ends once every task is completed"

    # Not a terminal: ASCII, no colours, nothing redrawn.
    code, out, err = run_cli(keyed_server, "tasks", "watch", thread, "--resource", resource, "--until-done")
    assert code == 0, err
    assert out.splitlines() == [f"Tasks of {thread}: 2/2 done", "  [x] Fix the bug", "  [x] Add a test"]


def test_errors_are_one_line_with_distinct_exit_codes(keyed_server):
    code, out, err = run_cli(keyed_server, "runs", "observe", "some-run", key="wrong-key")
    assert (code, out) == (4, "")
    assert err.strip() == "agentd: the server refused the API key: invalid API key (set AGENTD_API_KEY)"
    code, _, err = run_cli(keyed_server, "approvals", "list", "--resource", "r", key=None)
    assert code == 4 and "missing authorization" in err
    code, _, err = run_cli(keyed_server, "runs", "observe", "no-such-run")
    assert code == 5 and err.strip() == 'agentd: not found: run "no-such-run" is unknown or expired'
    closed = f"127.0.0.1:{free_port()}"
    code, _, err = run_cli(closed, "tasks", "watch", "t")
    assert code == 3 and err.startswith(f"agentd: cannot reach the agentd server at http://{closed}: ")
    assert len(err.strip().splitlines()) == 1

    # In the terminal too: chat with a wrong key says so before asking for anything.
    child = spawn(keyed_server, "chat", "worker", key="wrong-key")
    child.expect("agentd: the server refused the API key: invalid API key")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 4
    # A refused request ends that turn only: the chat asks for the next line.
    child = spawn(keyed_server, "chat", "worker", "--resource", "", NO_COLOR="1")
    child.expect("> ")
    child.sendline("Anything")
    child.expect("agentd: the server answered InvalidArgument: memory: A resourceId and a threadId must be provided")
    child.expect("> ")
    assert finish(child) == 0
    child = spawn(keyed_server, "chat", "nobody")
    child.expect('agentd: not found: agent "nobody" is not configured')
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 5
    assert "Traceback" not in (child.before or "") and "panicked" not in (child.before or "")
