"""End to end, against real uvicorn servers (issue 31): half-sent requests from a few client
addresses cannot hold every connection slot. Request headers have their own short deadline;
when the server is full a new address takes the place of a connection of the address holding
the most (one not running a request); and a connection that is refused reads a 503 with
Retry-After and a JSON detail, not a reset. Addresses 127.0.0.2, 127.0.0.3, ... are all
loopback on Linux: each stands for another client."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app, uvicorn_options
from tests.conftest import ENVS
from tests.processes import serve_process
from tests.servers import serve_app

HALF = b"GET /health HTTP/1.1\r\nhost: x\r\nx-slow: "
"""A request whose headers never end."""


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _half_sent(port: int, address: str) -> socket.socket:
    sock = socket.socket()
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(HALF)
    return sock


def _client(url: str, address: str) -> httpx.Client:
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address=address), timeout=30)


@contextlib.contextmanager
def _sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


def _read_all(sock: socket.socket, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes. A reset after a whole answer is how a
    client sees a server that closed with some of the client's bytes unread: the answer was
    read (httpx reads by content-length and is done); a reset before one raises."""
    sock.settimeout(timeout)
    out = b""
    while True:
        try:
            more = sock.recv(65536)
        except ConnectionResetError:
            head, _, body = out.partition(b"\r\n\r\n")
            length = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length: ")]
            if length and len(body) == int(length[0][16:]):
                return out
            raise
        if not more:
            return out
        out += more


def _refusal(reply: bytes, status: bytes = b"503") -> dict[str, str]:
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status.decode()} "), reply[:300]
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert json.loads(body)["detail"]
    return headers


def test_half_sent_headers_from_four_addresses_do_not_keep_a_fifth_out(gsm8k: Environment) -> None:
    """The issue's attack: ``--max-connections 100`` (64 per address), four addresses each
    opening 64 connections that never finish their headers. A client from a fifth address is
    served at once (long before any header deadline), and every hoarding connection the server
    let go read a 503 with Retry-After or was still open."""
    settings = ServerSettings(max_connections=100, header_timeout=60)
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url, _sockets() as held:
        port = _port(url)
        for address in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
            held += [_half_sent(port, address) for _ in range(64)]
        with _client(url, "127.0.0.6") as honest:
            r = honest.post("/gsm8k/num_tasks", json={"split": "test"})
            assert (r.status_code, r.json()) == (200, {"num_tasks": 1319})
        # Over 100 slots, 156 or more hoarding connections were refused or made room.
        answered: list[bytes] = []
        reset = 0
        deadline = time.monotonic() + 20
        waiting = list(held)
        while len(answered) + reset < 157 and time.monotonic() < deadline:
            ready, _, _ = select.select(waiting, [], [], 0.5)
            for sock in ready:
                waiting.remove(sock)
                try:
                    answered.append(_read_all(sock))
                except ConnectionResetError:
                    reset += 1
        assert (len(answered), reset) >= (157, 0)
        for reply in answered:
            assert int(_refusal(reply)["retry-after"]) >= 1


@pytest.fixture
def small(gsm8k: Environment) -> Iterator[str]:
    """Eight connections, eight per address: two addresses can fill it."""
    settings = ServerSettings(max_connections=8, max_connections_per_client=8, header_timeout=60)
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url:
        yield url


RUNNING = (
    b"POST /gsm8k/num_tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    b"content-length: 50\r\nexpect: 100-continue\r\n\r\n"
)
"""A request whose headers are complete and whose body never comes: it runs (waits for its
body), as the server's ``100 Continue`` shows."""


def _running(port: int, address: str) -> socket.socket:
    """A connection whose request runs (the server said ``100 Continue``) and never ends."""
    sock = socket.socket()
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(RUNNING)
    sock.settimeout(10)
    assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    return sock


def test_a_full_server_serves_a_new_address_and_refuses_with_a_503(small: str) -> None:
    port = _port(small)
    with _sockets() as held:
        held += [_half_sent(port, "127.0.0.2") for _ in range(5)]
        held += [_half_sent(port, "127.0.0.3") for _ in range(3)]
        # Full: a new address takes the place of one of 127.0.0.2's (the largest holder).
        with _client(small, "127.0.0.4") as newcomer:
            assert newcomer.get("/gsm8k/splits").status_code == 200
        # Answered before the newcomer's request was: readable now.
        let_go, _, _ = select.select(held, [], [], 10)
        assert len(let_go) == 1 and let_go[0] in held[:5]
        _refusal(_read_all(let_go[0]))
        held.remove(let_go[0])
        let_go[0].close()
        held.append(_half_sent(port, "127.0.0.3"))  # full again: four and four
        # Another from 127.0.0.3 would hold more than 127.0.0.2: it takes its own oldest's place.
        with _client(small, "127.0.0.3") as more:
            assert more.get("/gsm8k/splits").status_code == 200
        assert select.select(held, [], [], 10)[0] == [held[4]]  # 127.0.0.3's first
        for sock in held:
            sock.close()
        held.clear()
        # Eight requests running: nothing can give way, so a new address is refused with a
        # 503 its client reads (httpx sends its request, then reads the answer).
        held += [_running(port, "127.0.0.2") for _ in range(4)]
        held += [_running(port, "127.0.0.3") for _ in range(4)]
        with _client(small, "127.0.0.5") as another:
            r = another.get("/gsm8k/splits")
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
        assert r.json() == {"detail": "the server holds its maximum of 8 connections; retry shortly"}


def test_past_its_share_an_address_gives_up_its_oldest_waiting_connection(gsm8k: Environment) -> None:
    settings = ServerSettings(max_connections=50, max_connections_per_client=3, header_timeout=60)
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url, _sockets() as held:
        port = _port(url)
        held += [_half_sent(port, "127.0.0.2") for _ in range(3)]
        with _client(url, "127.0.0.2") as fourth:  # its oldest unfinished request makes room
            assert fourth.get("/gsm8k/splits").status_code == 200
        assert select.select(held, [], [], 10)[0] == [held[0]]
        _refusal(_read_all(held[0]))
        for sock in held:
            sock.close()
        held.clear()
        # Three requests running (each waits for its body): none can give way, so a fourth
        # connection is refused, with a 503 its client reads.
        held += [_running(port, "127.0.0.2") for _ in range(3)]
        with _client(url, "127.0.0.2") as fourth:
            r = fourth.get("/gsm8k/splits")
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
        assert r.json() == {"detail": "this address holds its maximum of 3 connections; retry shortly"}
        with _client(url, "127.0.0.3") as other:
            assert other.get("/gsm8k/splits").status_code == 200


def test_headers_have_their_own_short_deadline(gsm8k: Environment) -> None:
    """Headers not sent within ``header_timeout`` get a 408 with a JSON detail and free the
    slot; a body may still take the (longer) read timeout."""
    settings = ServerSettings(header_timeout=0.5, read_timeout=20)
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url:
        port = _port(url)
        with _sockets() as held:
            held.append(_half_sent(port, "127.0.0.2"))
            headers = _refusal(_read_all(held[0]), b"408")
            assert "retry-after" not in headers
            silent = socket.create_connection(("127.0.0.1", port))  # sends nothing at all
            held.append(silent)
            _refusal(_read_all(silent), b"408")
        # Headers on time, then a body sent slowly past the header deadline: answered.
        body = json.dumps({"split": "test"}).encode()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                b"POST /gsm8k/num_tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n" % len(body)
            )
            for i in range(len(body)):
                sock.sendall(body[i : i + 1])
                time.sleep(0.1)  # 1.6 s in all: three header deadlines
            reply = _read_until_body(sock)
        assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b'{"num_tasks":1319}')


def _read_until_body(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    out = b""
    while not out.endswith(b"}"):
        more = sock.recv(65536)
        if not more:
            break
        out += more
    return out


def test_serve_takes_a_header_timeout() -> None:
    with serve_process(str(ENVS / "gsm8k.yaml"), "--header-timeout", "0.5") as (url, _):
        with _sockets() as held:
            held.append(_half_sent(_port(url), "127.0.0.2"))
            _refusal(_read_all(held[0]), b"408")
        assert httpx.get(url + "/health").status_code == 200
