"""Fixtures for the polyglot client tests: Python stubs generated from proto/ at test time,
and a real agentd binary on a free loopback port with its own embedded store."""

import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def stubs():
    """Generates the Python stubs from proto/ into a temp dir and imports them."""
    from grpc_tools import protoc
    import importlib.resources

    out = tempfile.mkdtemp(prefix="agentd-py-")
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    args = ["protoc", f"-I{ROOT / 'proto'}", f"-I{well_known}", f"--python_out={out}", f"--grpc_python_out={out}", *protos]
    assert protoc.main(args) == 0, "protoc failed"
    sys.path.insert(0, out)
    from agentd.v1 import tasks_pb2, tasks_pb2_grpc  # noqa: E402

    return tasks_pb2, tasks_pb2_grpc


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server_address():
    """Starts target/debug/agentd (or $AGENTD_BIN) and waits until it answers."""
    binary = os.environ.get("AGENTD_BIN", str(ROOT / "target" / "debug" / "agentd"))
    assert os.path.exists(binary), f"{binary} is missing: run cargo build first"
    port = free_port()
    data = tempfile.mkdtemp(prefix="agentd-data-")
    env = dict(os.environ, AGENTD_LISTEN=f"127.0.0.1:{port}", AGENTD_DATA_DIR=data, AGENTD_STORE_URL="embedded")
    env.pop("AGENTD_CONFIG", None)
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            with grpc.insecure_channel(address) as channel:
                grpc.channel_ready_future(channel).result(timeout=0.5)
            break
        except grpc.FutureTimeoutError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                output = proc.stdout.read().decode(errors="replace")
                pytest.fail(f"agentd did not start:\n{output}")
    yield address
    proc.terminate()
    try:
        assert proc.wait(timeout=15) == 0, "agentd exits cleanly on SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture()
def channel(server_address):
    with grpc.insecure_channel(server_address) as channel:
        yield channel
