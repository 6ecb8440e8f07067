"""The sandbox judged by what happens, not by what the code prints: a listener on the host must
see no connection from a run, and one client's looping answers do not hold another client's
grade behind them (the sandbox's slots are shared by client, in turn). On every backend
(bubblewrap, Docker, Podman: tests/sandboxes.py)."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from envbuilder.environment import load_environment
from envbuilder.isolation.sandbox import Limits, Slots, run_code
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.sandboxes import BACKENDS, configured, make_backend
from tests.servers import serve_app


def _host_addresses() -> list[str]:
    """Loopback and the host's own outward address (the route a sandbox would take out)."""
    out = ["127.0.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: it only picks the route
            out.append(s.getsockname()[0])
        except OSError:
            pass
    return sorted(set(out))


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_listener_on_the_host_sees_no_connection_from_a_run(backend: str) -> None:
    listeners = []
    for address in _host_addresses():
        tcp = socket.socket()
        tcp.bind((address, 0))
        tcp.listen(16)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((address, 0))
        listeners.append((address, tcp, udp))
    targets = [(a, t.getsockname()[1], u.getsockname()[1]) for a, t, u in listeners]
    code = (
        "import socket\n"
        f"for host, tcp, udp in {targets!r}:\n"
        "    try:\n"
        "        socket.create_connection((host, tcp), timeout=1).sendall(b'escaped')\n"
        "    except OSError:\n"
        "        pass\n"
        "    try:\n"
        "        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'escaped', (host, udp))\n"
        "    except OSError:\n"
        "        pass\n"
        "print('tried')\n"
    )
    try:
        result = await run_code(
            ["python3", "-I", "main.py"],
            {"main.py": code.encode()},
            Limits(wall_seconds=20),
            backend=make_backend(backend),
        )
        assert "tried" in result.stdout  # the code ran to the end
        socks = [s for _, t, u in listeners for s in (t, u)]
        readable, _, _ = select.select(socks, [], [], 0.5)
        assert readable == [], "a connection or datagram from the sandbox reached the host"
    finally:
        for _, tcp, udp in listeners:
            tcp.close()
            udp.close()


@pytest.mark.asyncio
async def test_the_same_check_sees_a_connection_without_the_sandbox() -> None:
    """The listener itself works: a plain process reaches it (so the test above can fail)."""
    import asyncio
    import sys

    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    try:
        port = tcp.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'x')"
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
        await proc.wait()
        readable, _, _ = select.select([tcp], [], [], 2)
        assert readable == [tcp]
    finally:
        tcp.close()


# -- fair slots ---------------------------------------------------------------------------------

HOARDER, HONEST = "k-looper-0123456789abcdef", "k-honest-0123456789abcdefg"
LOOP = "    while True:\n        pass\n"
CPU_LIMIT = "cpu time limit: the code used its 5 s of CPU time and was killed"
GOOD = "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from envbuilder.isolation.sandbox import _slots

    monkeypatch.setattr(_slots, "_shared", Slots(2))  # two runs at once, whatever the cores
    settings = ServerSettings(api_keys=(HOARDER, HONEST), ping_interval=0.2)
    with configured(request.param):  # the grader takes the configured backend when loaded
        humaneval = load_environment(ENVS / "humaneval.yaml")
        with serve_app(create_app([humaneval], settings)) as base:
            yield base


def _submit(url: str, key: str, answer: str) -> dict[str, Any]:
    h = {"X-Session-ID": uuid.uuid4().hex, "X-API-Key": key}
    with httpx.Client(base_url=url, timeout=300, headers=h) as c:
        assert c.post("/create", json={"split": "test", "index": 0}).status_code == 200
        r = c.post("/humaneval/call", json={"name": "submit", "input": {"answer": answer}})
    end = r.text.split("event: end\r\ndata: ", 1)[1].split("\r\n", 1)[0]
    out: dict[str, Any] = json.loads(end)["output"]
    return out


def _wait_for(condition: Callable[[], bool], seconds: float = 120) -> None:
    """Until ``condition()`` holds (a generous deadline: the machine may be loaded)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come about"
        time.sleep(0.01)


def test_one_clients_looping_answers_do_not_hold_anothers_grade(url: str) -> None:
    from envbuilder.isolation.sandbox import _slots

    slots = _slots._shared
    assert slots is not None and slots.size == 2
    finished: list[str] = []
    lock = threading.Lock()

    def hostile() -> None:
        out = _submit(url, HOARDER, LOOP)
        with lock:
            # Its loop is stopped by the wall time or by the CPU limit of the answer's own
            # process (whichever the loaded machine reaches first): no reward either way.
            finished.append(f"hoarder:{out['reward']}:{out['metadata']['reason']}")

    threads = [threading.Thread(target=hostile, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    # Every loop has its place before the honest answer comes: two run, the others wait (or,
    # on a slow machine, some already ended).
    _wait_for(lambda: slots.in_use == 2 and slots.waiting + len(finished) == 6)
    honest = _submit(url, HONEST, GOOD)
    with lock:
        before = len(finished)
    for t in threads:
        t.join(300)
    assert honest["reward"] == 1.0
    # Its turn came when the first slot freed: at most the two running loops ended before it.
    assert before <= 3, finished
    assert len(finished) == 8, finished
    for f in finished:  # each loop ends with no reward (or void, never a reward, if its sandbox failed)
        assert f.startswith(("hoarder:0.0:", "hoarder:None:")), f
        if f.startswith("hoarder:0.0:"):  # and the reason names the limit that stopped it
            assert f.startswith(("hoarder:0.0:timeout: ", f"hoarder:0.0:{CPU_LIMIT}")), f
