"""End to end, against real uvicorn servers: what a hostile client or a careless spec author
can do to ``envbuilder serve`` is bounded, and the server keeps answering everyone else."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app, uvicorn_options
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.processes import wait_healthy
from tests.servers import free_port, serve_app

KEY = "k-e2e-0123456789abcdef"

SPEC = """\
name: hostile
dataset:
  type: parquet
  files: {test: data/gsm8k/test-00000-of-00001.parquet}
splits: {test: {}}
prompt: {template: %s}
submit: {max_attempts: 3, reveal_answer: false}
grader: %s
limits: {render_seconds: 1}
"""
# Freezes on task 3 only: row 0, which the spec's load renders to check the budgets, is quick.
FREEZE = (
    "\"{% if id == 'test-3' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    '{% endfor %}{% endif %}{{ question }}"'
)
EXACT = "{type: exact_match, target: \"{{ answer.split('####')[-1] }}\", extract: number}"
REDOS = '{type: regex, pattern: "^(a|aa)+$", mode: fullmatch, timeout: 2, max_answer_chars: 100}'


def _env(template: str, grader: str) -> Environment:
    return Environment(parse_spec(SPEC % (template, grader), file="hostile.yaml", base_dir=ENVS))


@pytest.fixture(scope="module")
def hostile_url() -> Iterator[str]:
    """A server whose prompt never ends and whose grader pattern backtracks for seconds."""
    settings = ServerSettings(read_timeout=0.5, max_task_range=1000)  # so a whole split is over the cap
    app = create_app([_env(FREEZE, REDOS)], settings)
    with serve_app(app, **uvicorn_options(settings)) as url:
        yield url


def _health_spans(url: str, stop: threading.Event) -> list[tuple[float, float]]:
    """(sent, answered) monotonic times of ``/health`` requests, one after another, until ``stop``."""
    spans: list[tuple[float, float]] = []
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            sent = time.monotonic()
            assert client.get("/health").status_code == 200
            spans.append((sent, time.monotonic()))
            time.sleep(0.02)
    return spans


def _while_probing(url: str, work: Any) -> tuple[Any, int]:
    """Run ``work()`` while another thread sends ``/health``; its result and how many health
    requests were both sent and answered while it ran. An ordering, not a time: a server held
    by the work answers none in between, however fast or loaded the machine is."""
    stop = threading.Event()
    out: list[list[tuple[float, float]]] = []
    probe = threading.Thread(target=lambda: out.append(_health_spans(url, stop)))
    probe.start()
    time.sleep(0.05)
    began = time.monotonic()
    try:
        result = work()
    finally:
        ended = time.monotonic()
        stop.set()
        probe.join()
    return result, sum(began <= sent and answered <= ended for sent, answered in out[0])


def _create(client: httpx.Client, sid: str, index: int = 0) -> None:
    r = client.post("/create", headers={"X-Session-ID": sid}, json={"split": "test", "index": index})
    assert r.status_code == 200, r.text


def _end(stream: str) -> dict[str, Any]:
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        if "event: end" in block:
            return json.loads("".join(x[6:] for x in block.split("\n") if x.startswith("data: ")))
    raise AssertionError(stream)


def test_a_freezing_template_is_cut_off_and_health_stays_fast(hostile_url: str) -> None:
    with httpx.Client(base_url=hostile_url, timeout=30) as client:
        _create(client, "freeze", index=3)
        r, answered = _while_probing(
            hostile_url, lambda: client.get("/hostile/prompt", headers={"X-Session-ID": "freeze"})
        )
    assert (r.status_code, r.headers["retry-after"]) == (503, "5")  # the spec's fault, not a crash
    assert r.json() == {
        "detail": "the environment cannot render this task's prompt: prompt.template: rendering took "
        "longer than 1 s and was stopped. A loop in the template runs too long; loop over the task's "
        "fields only (or raise `limits.render_seconds` in the spec). Its spec is at fault, not the "
        "request: retry later, or skip the task"
    }
    assert answered >= 5  # /health kept answering while the render ran


def test_a_redos_answer_does_not_slow_health(hostile_url: str) -> None:
    with httpx.Client(base_url=hostile_url, timeout=30) as client:
        _create(client, "redos")
        body = {"name": "submit", "input": {"answer": "a" * 60 + "!"}}
        started = time.perf_counter()
        r, answered = _while_probing(
            hostile_url, lambda: client.post("/hostile/call", headers={"X-Session-ID": "redos"}, json=body)
        )
        took = time.perf_counter() - started
    out = _end(r.text)["output"]
    assert out["metadata"]["outcome"] == "ungradeable"
    assert out["metadata"]["reason"] == "matching the pattern took too long on this answer"
    assert "pattern" not in out["metadata"]  # built from the task: gold until the episode ends
    assert took >= 1.5  # the match really ran for its 2 s timeout...
    assert answered >= 10  # ...and nobody else waited for it


def test_a_100_mb_body_gets_413_at_once(hostile_url: str) -> None:
    port = int(hostile_url.rsplit(":", 1)[1])
    for framing in (b"content-length: 104857600\r\n", b"transfer-encoding: chunked\r\n"):
        cpu = time.process_time()
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /hostile/num_tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n")
            sock.sendall(framing + b"\r\n")
            chunk = b"x" * (1 << 20)
            reply = b""
            try:
                for _ in range(100):  # up to 100 MB, until the server answers and closes
                    sock.settimeout(5)
                    try:
                        if framing.startswith(b"transfer"):
                            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        else:
                            sock.sendall(chunk)
                    except TimeoutError:
                        break  # it stopped reading (it has answered): read the answer
                    sock.settimeout(0.001)
                    try:
                        reply += sock.recv(65536)
                        break
                    except TimeoutError:
                        pass
            except (BrokenPipeError, ConnectionResetError):
                pass
            sock.settimeout(5)
            while b"\r\n\r\n" not in reply:
                more = sock.recv(65536)
                if not more:
                    break
                reply += more
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu  # client and server share this process: an upper bound
        assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
        assert b"connection: close" in reply.lower()
        assert b'{"detail":"the request body is larger than 1,048,576 bytes"}' in reply
        assert wall < 2 and cpu < 0.5, (framing, wall, cpu)


def test_a_body_a_little_too_large_gets_its_413_not_a_reset(hostile_url: str) -> None:
    # The server reads and drops a body up to four times its limit before answering, so a client
    # still sending it reads the answer; closing with its bytes unread would reset the connection
    # under the client's feet (a broken pipe while it sends, never the 413).
    port = int(hostile_url.rsplit(":", 1)[1])
    for framing in (b"content-length: 4000000\r\n", b"transfer-encoding: chunked\r\n"):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /hostile/num_tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n")
            sock.sendall(framing + b"\r\n")
            # 4,000,000 bytes in pieces, with no pause between them: the server answers after the
            # first 1,048,576 and reads on, dropping the rest (within its drain deadline, which a
            # client pausing on a loaded machine could outlast: then its broken pipe is the policy).
            piece = b"x" * 62_500
            for _ in range(64):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if b"chunked" in framing else piece)
            if b"chunked" in framing:
                sock.sendall(b"0\r\n\r\n")
            sock.settimeout(10)
            reply = b""
            while b"}" not in reply and (more := sock.recv(65536)):
                reply += more
        assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]
        assert reply.endswith(b'{"detail":"the request body is larger than 1,048,576 bytes"}')


def test_a_request_that_is_not_http_gets_a_json_400(hostile_url: str) -> None:
    port = int(hostile_url.rsplit(":", 1)[1])
    for raw in (
        b"POST /create HTTP/1.1\r\nhost: x\r\nx-session-id: abc\r\r\ncontent-length: 2\r\n\r\n{}",
        b"GET /health HTTP/9.9 extra\r\nhost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello\r\n\r\n",
    ):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(raw)
            sock.settimeout(5)
            reply = b""
            while more := sock.recv(65536):
                reply += more
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), reply[:200]
        assert b"content-type: application/json" in head.lower()
        detail = json.loads(body)["detail"]
        assert detail.startswith("the request is not valid HTTP/1.1")
        # The session id copied with its \r from curl's output: the hint says so and how to fix it.
        assert ("carriage return" in detail and "tr -d" in detail) == raw.startswith(b"POST /create")


def test_half_open_connections_are_dropped_and_huge_headers_refused(hostile_url: str) -> None:
    port = int(hostile_url.rsplit(":", 1)[1])
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    for i, sock in enumerate(socks):
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n" if i % 2 else b"POST /create HTTP/1.1\r\n")
    for sock in socks:  # the read timeout is 0.5 s: headers later than that get a 408, then EOF
        sock.settimeout(10)
        reply = b""
        while more := sock.recv(4096):
            reply += more
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head
        assert json.loads(body) == {"detail": "the request headers did not arrive within 0.5 s"}
        sock.close()
    assert httpx.get(f"{hostile_url}/health").status_code == 200
    r = httpx.get(f"{hostile_url}/health", headers={"X-Session-ID": "s" * 50_000})
    assert r.status_code == 431
    assert r.json() == {"detail": "the request line and headers are larger than 16384 bytes"}


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status"),
    [
        ("GET", "/%ff", {}, None, 404),
        ("GET", "/foo%0abar", {}, None, 404),
        (
            "POST",
            "/hostile/num_tasks",
            {"content-type": "application/json"},
            b'{"split": 1' + b"0" * 40 + b"}",
            422,
        ),
        ("POST", "/hostile/num_tasks", {"content-type": "text/plain"}, b"\xff\xfe\x00", 422),
        ("POST", "/hostile/num_tasks", {"content-type": "application/jsonx"}, b'{"split":"test"}', 422),
        ("POST", "/create", {"X-Session-ID": "x" * 200}, b"{}", 400),
        ("GET", "/hostile/prompt", {"X-Session-ID": "a\tb"}, None, 400),
        ("POST", "/hostile/task_range", {"content-type": "application/json"}, b'{"split":"test"}', 400),
    ],
)
def test_malformed_requests_get_a_4xx_and_the_connection_stays_usable(
    hostile_url: str, method: str, path: str, headers: dict[str, str], body: bytes | None, status: int
) -> None:
    with httpx.Client(base_url=hostile_url, timeout=10, follow_redirects=True) as client:
        r = client.request(method, path, headers=headers, content=body)
        assert r.status_code == status, r.text
        assert "detail" in r.json()
        assert b"\xff" not in r.content and b"0" * 40 not in r.content  # the input is not echoed
        assert client.get("/health").status_code == 200  # same connection, next request


def test_create_echoes_no_secrets_in_a_422(hostile_url: str) -> None:
    body = b'{"split":"test","index":0,"secrets":{"K":"sk-SECRET-1"}}'
    r = httpx.post(f"{hostile_url}/create", headers={"X-Session-ID": "sec"}, content=body)
    assert r.status_code == 422
    assert "sk-SECRET-1" not in r.text


def test_the_target_is_not_revealed_before_the_last_attempt() -> None:
    env = _env('"{{ question }}"', EXACT)
    target = env.split("test").task(0)["answer"].split("####")[-1].strip()
    with serve_app(create_app([env])) as url, httpx.Client(base_url=url, timeout=10) as client:
        _create(client, "gold")
        assert "answer" not in client.post("/hostile/task", json={"split": "test", "index": 0}).json()["task"]
        outs = []
        for _ in range(3):
            r = client.post(
                "/hostile/call",
                headers={"X-Session-ID": "gold"},
                json={"name": "submit", "input": {"answer": "-1"}},
            )
            outs.append(_end(r.text)["output"])
    assert [o["finished"] for o in outs] == [False, False, True]
    for out in outs:
        assert "target" not in out["metadata"]
        assert target not in json.dumps(out)  # reveal_answer is false: not even at the end


def test_api_keys_with_both_reference_clients(gsm8k: Environment) -> None:
    from openreward import EnvironmentsAPI
    from ors.client import ORS

    settings = ServerSettings(api_keys=(KEY,))
    with serve_app(create_app([gsm8k], settings), **uvicorn_options(settings)) as url:
        assert httpx.get(f"{url}/health").status_code == 200
        for path in ("/gsm8k/splits", "/list_environments", "/openapi.json"):
            r = httpx.get(url + path, headers={"X-API-Key": "wrong-key-0123456789"})
            assert r.status_code == 401 and r.json() == {
                "detail": "an API key is required: send it in the X-API-Key header"
            }
            assert KEY not in r.text
        assert httpx.get(f"{url}/gsm8k/splits", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200

        with ORS(base_url=url, api_key=KEY) as client:
            env = client.environment("gsm8k")
            assert env.num_tasks("test") == 1319
            with env.session(split="test", index=0) as s:
                assert s.get_prompt()
                out = s.call_tool("submit", {"answer": "-1"})
                assert out.metadata["outcome"] == "incorrect"

        api = EnvironmentsAPI(base_url=url, api_key=KEY)
        env = api.get(name="gsm8k", variant="gsm8k")
        assert env.num_tasks("test") == 1319
        with env.session(split="test", index=0) as s:
            assert s.get_prompt()
            out = s.call_tool("submit", {"answer": "-1"})
            assert out.metadata["outcome"] == "incorrect"

        with ORS(base_url=url) as client, pytest.raises(Exception):  # noqa: B017 (any client error)
            client.environment("gsm8k").num_tasks("test")


def test_x_secrets_key_alone_is_accepted(gsm8k: Environment) -> None:
    """What openreward sends on streaming requests: no X-API-Key, the key in X-Secrets."""
    settings = ServerSettings(api_keys=(KEY,))
    secrets = base64.b64encode(json.dumps({"api_key": {"value": KEY, "allowed_domains": []}}).encode())
    with serve_app(create_app([gsm8k], settings)) as url:
        r = httpx.post(f"{url}/create_session", headers={"X-Secrets": secrets.decode()})
        assert r.status_code == 200
        assert httpx.post(f"{url}/create_session", headers={"X-Secrets": "%%%"}).status_code == 401


def test_sigterm_stops_a_server_stuck_in_a_template(tmp_path: Path) -> None:
    spec = tmp_path / "freeze.yaml"
    spec.write_text((SPEC % (FREEZE, EXACT)).replace("data/gsm8k", str(ENVS / "data" / "gsm8k")))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envbuilder",
            "serve",
            str(spec),
            "--port",
            str(port),
            "--data-root",
            str(ENVS),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        httpx.post(f"{url}/create", headers={"X-Session-ID": "t"}, json={"split": "test", "index": 3})
        stuck = threading.Thread(
            target=lambda: httpx.get(f"{url}/hostile/prompt", headers={"X-Session-ID": "t"}, timeout=30)
        )
        stuck.start()
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        # It stops: within its graceful timeout (10 s) on a quiet machine, and in minutes at
        # most on a loaded one, where the stuck render alone would hold it for hours.
        proc.wait(timeout=300)
        stuck.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_catalog_hides_the_judge_endpoint() -> None:
    judge = "{type: llm_judge, base_url: 'http://10.9.8.7:8000/v1', model: m, reference: '{{ answer }}'}"
    with serve_app(create_app([_env('"{{ question }}"', judge)])) as url:
        body = httpx.get(f"{url}/catalog").json()
    assert body["environments"][0]["graders"][0]["model"] == "m"
    assert "10.9.8.7" not in json.dumps(body)


def test_served_specs_read_only_files_inside_their_folder(tmp_path: Path) -> None:
    from envbuilder import paths
    from envbuilder.environment import load_environment
    from envbuilder.errors import SpecError

    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"question": "TOP-SECRET-LINE", "answer": "1"}\n')
    folder = tmp_path / "spec"
    folder.mkdir()
    (folder / "t.j2").symlink_to(tmp_path / "outside.j2")
    (tmp_path / "outside.j2").write_text("TOP-SECRET-TEMPLATE {{ question }}")
    spec = folder / "s.yaml"
    spec.write_text(
        "name: leak\ndataset:\n  type: jsonl\n  files: {test: ../secret.jsonl}\nsplits: {test: {}}\n"
        "prompt: {template_file: t.j2}\ngrader: {type: exact_match, target: '{{ answer }}'}\n"
    )
    with paths.contained([]), pytest.raises(SpecError) as info:
        load_environment(spec)
    text = str(info.value)
    assert "names " + str(folder / ".." / "secret.jsonl") + ", which is outside the spec's folder" in text
    assert "template file 't.j2' resolves to a file outside the spec's folder" in text
    assert "TOP-SECRET" not in text
    with paths.contained([tmp_path]):  # the operator allows the folder: --data-root
        assert (
            load_environment(spec).prompt({"question": "q", "answer": "1"})[0].text == "TOP-SECRET-TEMPLATE q"
        )


def test_gold_fields_never_appear_and_sent_back_tasks_are_graded_in_full(gsm8k: Environment) -> None:
    from openreward import EnvironmentsAPI
    from ors.client import ORS

    assert gsm8k.private_fields == {"answer"}  # read by the grader only: private by default
    gold = gsm8k.split("test").task(7)["answer"].split("####")[-1].strip()
    with serve_app(create_app([gsm8k])) as url:
        r = httpx.post(f"{url}/gsm8k/tasks", json={"split": "test"})
        assert r.status_code == 200 and '"answer"' not in r.text and len(r.json()["tasks"]) == 1319
        r = httpx.post(f"{url}/gsm8k/task_range", json={"split": "test", "start": 0, "stop": 50})
        assert '"answer"' not in r.text
        with ORS(base_url=url) as client:
            env = client.environment("gsm8k")
            task = env.get_task("test", 7)
            assert "answer" not in task.task_spec
            with env.session(task=task) as s:  # sent back without its answer: found by id
                out = s.call_tool("submit", {"answer": gold})
            assert out.reward == 1.0
            listed = env.list_tasks("test")[9]  # from /tasks: found by its default id
            with env.session(task=listed) as s:
                assert s.call_tool("submit", {"answer": "-1"}).metadata["outcome"] == "incorrect"
        env = EnvironmentsAPI(base_url=url, api_key=None).get(name="gsm8k", variant="gsm8k")
        task = env.get_task_range("test", start=7, stop=8)[0]
        assert "answer" not in task.task_spec
        with env.session(task=task) as s:
            assert s.call_tool("submit", {"answer": gold}).reward == 1.0
        # A made-up task is refused: it names no served row (--client-tasks is off).
        r = httpx.post(
            f"{url}/create",
            headers={"X-Session-ID": "forged"},
            json={"task_spec": {"id": "x-1", "question": "?"}},
        )
        assert r.status_code == 403 and "--client-tasks" in r.json()["detail"]


def test_serve_refuses_a_public_bind_without_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from envbuilder.cli import app

    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: runs.append(kwargs))
    spec = str(ENVS / "gsm8k.yaml")
    result = CliRunner().invoke(app, ["serve", spec, "--host", "0.0.0.0"])
    assert result.exit_code == 2 and runs == []
    message = (
        "error: --host 0.0.0.0 exposes the server, and every gold answer, without an API key. "
        "Pass --api-key-file (or --api-key), or --public to serve it open"
    )
    assert result.stderr == message + "\n"
    assert message in (ENVS.parent / "docs" / "how-to" / "security.md").read_text()
    result = CliRunner().invoke(app, ["serve", spec, "--host", "0.0.0.0", "--public"])
    assert result.exit_code == 0 and "warning: serving 0.0.0.0 with no API key" in result.stderr
    keys = tmp_path / "keys.txt"
    keys.write_text("# operators\nshort\n")
    result = CliRunner().invoke(app, ["serve", spec, "--api-key-file", str(keys)])
    assert result.exit_code == 1 and "1 API key(s) shorter than 16 characters" in result.stderr
    assert "short" not in result.stderr.replace("shorter", "")
    keys.write_text(f"# operators\n{KEY}\n")
    result = CliRunner().invoke(app, ["serve", spec, "--api-key-file", str(keys), "--read-timeout", "3"])
    assert result.exit_code == 0 and KEY not in result.output
    assert runs[-1]["host"] == "127.0.0.1" and runs[-1]["timeout_graceful_shutdown"] == 10.0
    assert runs[-1]["http"].read_timeout == 3.0 and runs[-1]["http"].max_connections == 2048
