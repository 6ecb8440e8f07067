"""`envbuilder serve` on a port that is taken: refused before loading anything, naming the holder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.cli._port import port_taken
from tests.conftest import ENVS

runner = CliRunner()


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_taken_port_is_refused_with_its_holder(listening: int) -> None:
    result = runner.invoke(
        app, ["serve", str(ENVS / "gsm8k.yaml"), "--host", "127.0.0.1", "--port", str(listening)]
    )
    assert result.exit_code == 1
    assert result.output.startswith(f"error: 127.0.0.1:{listening} is already in use by pid {os.getpid()} (")
    assert result.output.endswith(". Stop it, or pass --port with a free port (0: any)\n")
    assert "listening on" not in result.output and "serving" not in result.output


def test_without_psutil_the_holder_is_left_out(listening: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psutil", None)
    assert port_taken("0.0.0.0", listening) == f"0.0.0.0:{listening} is already in use"


def test_a_free_port_and_port_zero_pass() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    assert port_taken("127.0.0.1", free) is None
    assert port_taken("127.0.0.1", 0) is None


def test_a_missing_spec_is_reported_before_a_taken_port(listening: int) -> None:
    result = runner.invoke(app, ["serve", "nope.yaml", "--port", str(listening)])
    assert (result.exit_code, result.output) == (
        1,
        "error: nope.yaml was not loaded: no such file or folder. Check the path\n"
        "error: no environment loaded\n",
    )


_SERVER_WITH_A_WORKER = """
import os, socket, sys, time
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
if os.fork() == 0:  # a worker sharing the server's socket, as `serve --workers` has
    time.sleep(120)
    os._exit(0)
print(sock.getsockname()[1], flush=True)
time.sleep(120)
"""


def test_a_port_held_by_a_server_and_its_workers_names_the_server() -> None:
    argv = [sys.executable, "-c", _SERVER_WITH_A_WORKER]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        message = port_taken("127.0.0.1", port)
        assert message is not None and message.startswith(
            f"127.0.0.1:{port} is already in use by pid {server.pid} ("
        ), message
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # the server and its worker (its own session)
        server.communicate()
