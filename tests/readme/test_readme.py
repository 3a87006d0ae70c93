"""Runs the README's shell blocks literally, in order, as a newcomer would on a fresh clone.

Every ```sh block runs unless the line before it says why not:
  <!-- readme-test: skip <reason> -->    not run here (needs Docker, a cluster, the network...)
  <!-- readme-test: server <port>... --> a long-running command: started in the background (after
                                         stopping whatever an earlier block started on those
                                         ports), ready once every port accepts connections
  <!-- readme-test: follow -->           a command that follows a stream until interrupted: it
                                         must print and keep running for a while, then is stopped
A block runs with `bash -euo pipefail` from the repository root and must exit 0. The servers'
data goes to a temporary directory (AGENTD_DATA_DIR), so a developer's ./data is left alone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|server|follow)\s*(.*?)\s*-->")
# How long a `follow` block must keep running (and printing) before it is stopped.
FOLLOW_FOR = 2.0
# A first build of the release binary happens inside `cargo run --release` on a fresh clone.
SERVER_START_TIMEOUT = 900
COMMAND_TIMEOUT = 180


def default_interrupts() -> None:
    """Ctrl-C as in a terminal: a test launched in the background by a shell without job control
    inherits SIGINT ignored, and so would the commands (Go's grpcurl keeps an ignored SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@dataclass
class Block:
    line: int
    code: str
    kind: str = "run"  # run | skip | server | follow
    argument: str = ""


def blocks(text: str) -> list[Block]:
    found = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```"):
            language = fence[3:].strip()
            start = i
            i += 1
            body = []
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            if language in ("sh", "bash", "shell"):
                block = Block(line=start + 1, code="\n".join(body))
                previous = next((l for l in reversed(lines[:start]) if l.strip()), "")
                marker = MARKER.search(previous)
                if marker:
                    block.kind, block.argument = marker.group(1), marker.group(2)
                found.append(block)
        i += 1
    return found


def stop_group(process: subprocess.Popen, sig: int, timeout: float) -> str | None:
    """Sends `sig` to the process group `process` leads and waits up to `timeout` seconds. A group
    that outlives it is killed, and what each of its processes was doing (`ps`) is returned."""
    if process.poll() is not None:
        return None
    os.killpg(process.pid, sig)
    try:
        process.wait(timeout=timeout)
        return None
    except subprocess.TimeoutExpired:
        states = subprocess.run(
            ["ps", "-o", "pid,stat,wchan:24,args", "-s", str(process.pid)],
            capture_output=True, text=True,
        ).stdout
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return states


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Server:
    block: Block
    ports: list[int]
    process: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        stop_group(self.process, signal.SIGTERM, 30)


@dataclass
class Session:
    env: dict
    logs: Path
    servers: list[Server] = field(default_factory=list)

    def spawn(self, block: Block) -> tuple[subprocess.Popen, Path]:
        """Starts `block` in the background, in its own process group, its output in a log."""
        log = self.logs / f"line-{block.line}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", block.code],
                cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=default_interrupts,
            )
        return process, log

    def start(self, block: Block) -> None:
        ports = [int(p) for p in block.argument.split()]
        assert ports, f"README line {block.line}: a server marker names its ports"
        for server in [s for s in self.servers if set(s.ports) & set(ports)]:
            server.stop()
            self.servers.remove(server)
        deadline = time.time() + 30
        while any(port_open(p) for p in ports):
            assert time.time() < deadline, f"README line {block.line}: ports {ports} are taken by another program"
            time.sleep(0.1)
        process, log = self.spawn(block)
        server = Server(block, ports, process, log)
        self.servers.append(server)
        deadline = time.time() + SERVER_START_TIMEOUT
        while not all(port_open(p) for p in ports):
            if process.poll() is not None or time.time() > deadline:
                pytest.fail(f"README line {block.line} did not start serving {ports}:\n{block.code}\n{server.output()}")
            time.sleep(0.2)

    def run(self, block: Block) -> None:
        try:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block.code],
                cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"README line {block.line} took over {COMMAND_TIMEOUT}s:\n{block.code}")
        servers = "".join(f"\n--- server of line {s.block.line}:\n{s.output()}" for s in self.servers)
        assert done.returncode == 0, (
            f"README line {block.line} failed ({done.returncode}):\n{block.code}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}{servers}"
        )
        assert "ERROR:" not in done.stdout + done.stderr, f"README line {block.line} printed an error:\n{done.stdout}{done.stderr}"

    def follow(self, block: Block) -> None:
        process, log = self.spawn(block)
        time.sleep(FOLLOW_FOR)
        code = process.poll()
        states = stop_group(process, signal.SIGINT, 10)
        if states is not None:
            pytest.fail(
                f"README line {block.line} did not stop on Ctrl-C within 10 s:\n{block.code}\n"
                f"{states}\n{log.read_text(errors='replace')[-3000:]}"
            )
        output = log.read_text(errors="replace")
        assert code in (None, 0), f"README line {block.line} failed ({code}):\n{block.code}\n{output}"
        assert output.strip(), f"README line {block.line} printed nothing in {FOLLOW_FOR}s:\n{block.code}"
        assert "ERROR:" not in output, f"README line {block.line} printed an error:\n{output}"

    def close(self) -> None:
        for server in reversed(self.servers):
            server.stop()


def test_every_block_is_run_or_says_why_not():
    for block in blocks(README.read_text()):
        if block.kind == "skip":
            assert len(block.argument) > 10, f"README line {block.line}: say why the block is not run"


def test_readme_commands_work_as_written(tmp_path):
    venv_bin = ROOT / ".venv" / "bin"
    assert (venv_bin / "grpcurl").exists(), "grpcurl is missing from .venv: run scripts/setup.sh"
    assert shutil.which("curl"), "curl is missing: run scripts/setup.sh"
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(PATH=f"{venv_bin}{os.pathsep}{env['PATH']}", AGENTD_DATA_DIR=str(data))
    session = Session(env=env, logs=tmp_path)
    ran = 0
    try:
        for block in blocks(README.read_text()):
            if block.kind == "skip":
                continue
            if block.kind == "server":
                session.start(block)
            elif block.kind == "follow":
                session.follow(block)
            else:
                session.run(block)
            ran += 1
    finally:
        session.close()
    assert ran >= 15, f"only {ran} README blocks ran"
