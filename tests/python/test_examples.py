"""The quickstart examples run as a user runs them (Python with the venv's interpreter, the
TypeScript one with its pinned tsx), against the real binary serving with an API key on the mock
`worker` model: each streams a run, approves (or declines) the call it waits for, then reads the
thread's task list."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import API_KEY

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / "examples" / "python" / "quickstart.py"
TYPESCRIPT = ROOT / "examples" / "typescript"

APPROVED = [
    '-> task_write({"tasks":[{"activeForm":"Working on Write code","content":"Write code","status":"in_progress"},'
    '{"activeForm":"Working on Test it","content":"Test it","status":"pending"}]})',
    "approving task_write",
    "<- task_write",
    '-> task_complete({"id":"task_write_code"})',
    "<- task_complete",
    '-> task_complete({"id":"task_test_it"})',
    "<- task_complete",
    "Done: Write code, Test it",
    "finished: FINISH_REASON_STOP, 4 steps",
    "tasks: 2/2 done",
    "  [x] Write code",
    "  [x] Test it",
]

DECLINED = [
    "declining task_write: not today",
    "x task_write declined: not today",
    "Stopped: not today",
    "finished: FINISH_REASON_STOP, 2 steps",
    "tasks: 0/0 done",
]


def example_env(server, key=API_KEY):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["AGENTD_SERVER"] = server
    if key is not None:
        env["AGENTD_API_KEY"] = key
    return env


def run(command, server, key=API_KEY, cwd=ROOT):
    out = subprocess.run(command, env=example_env(server, key), cwd=cwd, capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout.splitlines(), out.stderr


def typescript(*args):
    tsx = TYPESCRIPT / "node_modules" / ".bin" / "tsx"
    assert shutil.which("node"), "node is missing: run scripts/setup.sh"
    assert tsx.exists(), f"{tsx} is missing: run scripts/setup.sh"
    return [str(tsx), "quickstart.ts", *args]


def check_approved(lines, thread):
    assert lines[0] == f"run on thread {thread}"
    # The waiting call's id is the mock's; everything else is exact.
    assert lines[2].startswith("|| task_write waits for approval (tool call call_")
    assert [lines[1], *lines[3:]] == APPROVED


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_quickstart_streams_approves_and_reads_the_task_list(keyed_server, language):
    thread = f"ex-{language}-approve"
    args = ["--agent", "careful", "--thread", thread, "--resource", "examples", "Write code, Test it"]
    if language == "python":
        code, lines, err = run([sys.executable, str(PYTHON), *args], keyed_server)
    else:
        code, lines, err = run(typescript(*args), keyed_server, cwd=TYPESCRIPT)
    assert code == 0, err
    check_approved(lines, thread)


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_quickstart_declines_with_a_reason(keyed_server, language):
    args = ["--thread", f"ex-{language}-decline", "--resource", "examples", "--decline", "not today"]
    if language == "python":
        code, lines, err = run([sys.executable, str(PYTHON), *args], keyed_server)
    else:
        code, lines, err = run(typescript(*args), keyed_server, cwd=TYPESCRIPT)
    assert code == 0, err
    assert lines[-len(DECLINED) :] == DECLINED


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_quickstart_without_the_key_says_why(keyed_server, language):
    if language == "python":
        code, _, err = run([sys.executable, str(PYTHON)], keyed_server, key=None)
    else:
        code, _, err = run(typescript(), keyed_server, key=None, cwd=TYPESCRIPT)
    assert code == 1
    assert err.strip().splitlines()[-1] == "agentd: UNAUTHENTICATED: missing authorization: Bearer <api key>"


def test_typescript_example_type_checks():
    tsc = TYPESCRIPT / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), f"{tsc} is missing: run scripts/setup.sh"
    out = subprocess.run([str(tsc), "--noEmit", "-p", str(TYPESCRIPT)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
