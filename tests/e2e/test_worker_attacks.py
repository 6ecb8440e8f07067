"""End to end against a real ``envbuilder serve`` with real bubblewrap: the third round of attacks
(issue 31) on the processes that grade answers. Each test fails on the server as it was before
that issue: a reasoning-gym answer that SymPy's ``parse_expr`` evaluates wrote a pickled reply
of its own making (code in the server, a forged grade, a forged reason), poisoned the worker for
everyone's later answers, left processes behind, took an idle worker down with it, and ran
unconfined without a word where bubblewrap could not.

The answers here are Python run by the checker (``exec(...)``), written so that the payload
works on the old worker protocol (a length header and a pickle on the worker's reply pipe).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envbuilder.environment import load_environment
from tests.conftest import ENVS
from tests.processes import serve_process
from tests.servers import free_port

pytestmark = pytest.mark.skipif(
    not os.environ.get("CI") and subprocess.run(["which", "bwrap"], capture_output=True).returncode != 0,
    reason="bubblewrap is not installed",
)

READY = 600
"""Seconds a server may take to start: it loads reasoning-gym (seconds) and starts a confined
worker to check its limits, which takes long on a loaded machine."""
KEY_A, KEY_B = "k-attacker-0123456789abcdef", "k-honest-0123456789abcdefgh"
COUNTDOWN = """\
name: countdown
dataset:
  type: reasoning_gym
  num_tasks: 1000
  seed: 31
  tasks: {countdown: {}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: reasoning_gym, timeout: 20}
"""

# Write a frame (4-byte length, pickle) on every descriptor the worker holds, then exit before
# the worker's own reply: the old server read the first frame and unpickled it.
_FORGE = """\
import os, pickle, struct
{payload}
frame = struct.pack("!I", len(data)) + data
for fd in range(3, 16):
    try:
        os.write(fd, frame)
    except OSError:
        pass
os._exit(0)
"""
_RUN_IN_SERVER = """\
class RunsCode:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
data = pickle.dumps(("ok", RunsCode()))
"""
_FULL_MARKS = 'data = pickle.dumps(("ok", 1.0))'
_REASON = (
    "from envbuilder.errors import GraderError\n"
    'data = pickle.dumps(("error", GraderError("PWNED: chosen by the answer")))'
)
# Replace every family's checker with one that gives 0.0 (or 1.0 to a chosen word).
_POISON = """\
import reasoning_gym.factory as factory
for cls, _ in factory.DATASETS.values():
    cls.score_answer = lambda self, answer, entry: 1.0 if answer == "abracadabra" else 0.0
"""
_EXIT_LATER = "import os, threading\nthreading.Timer(0.5, os._exit, (0,)).start()"
_FORK_BOMB = """\
import os, time
for i in range(400):
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    except OSError:
        break
"""
_MEMORY_BOMB = """\
import os, time
for i in range(5):
    if os.fork() == 0:
        block = bytearray(600 << 20)
        for j in range(0, len(block), 4096):
            block[j] = 1
        time.sleep(600)
        os._exit(0)
"""


def _code(source: str) -> str:
    """An answer that the countdown checker runs as ``source`` (with globals of its own, so that
    the functions it defines see its imports)."""
    return f"exec({source!r}, {{}})"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """The countdown spec and the shipped reasoning_mix, with two keys, one checker process (so
    that, before issue 31, every answer went to the same worker); its URL, process and stdout."""
    folder = tmp_path_factory.mktemp("countdown")
    spec = folder / "countdown.yaml"
    spec.write_text(COUNTDOWN)
    args = (str(spec), str(ENVS / "reasoning_mix.yaml"), "--api-key", KEY_A, "--api-key", KEY_B)
    out = folder / "stdout"
    env = {"ENVBUILDER_GRADING_PROCESSES": "1"}
    with serve_process(*args, env=env, stdout=out, ready_timeout=READY) as (url, proc):
        # Warm: the checker process has imported reasoning-gym (before issue 31 that happened
        # inside the first checks' 10 s, which a loaded machine overran).
        gold = _gold("easy", 1)[0]
        with httpx.Client(base_url=url, timeout=300) as c:
            for _ in range(10):
                if _submit(c, KEY_B, "reasoning_mix", "easy", 0, gold)["reward"] == 1.0:
                    break
        yield url, proc, out


def _submit(client: httpx.Client, key: str, env: str, split: str, index: int, answer: str) -> dict[str, Any]:
    h = {"X-Session-ID": uuid.uuid4().hex, "X-API-Key": key}
    r = client.post("/create", headers=h, json={"env_name": env, "split": split, "index": index})
    assert r.status_code == 200, r.text
    r = client.post(
        f"/{env}/call", headers=h, json={"name": "submit", "input": {"answer": answer}}, timeout=300
    )
    assert r.status_code == 200, r.text
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    out: dict[str, Any] = json.loads(events[-1])["output"]
    return out


def _gold(split: str, count: int) -> list[str]:
    """reasoning_mix's first gold answers of ``split`` (the same rows the server serves)."""
    env = load_environment(ENVS / "reasoning_mix.yaml")
    return [str(env.split(split).task(i)["answer"]) for i in range(count)]


def _descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for p in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1])
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def _not_full_marks(out: dict[str, Any]) -> bool:
    return out["reward"] is None or out["reward"] < 1.0


def test_an_answer_cannot_run_code_in_the_server_or_forge_its_grade_or_reason(
    served: tuple[str, subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    marker = tmp_path / "written-by-the-server"
    forgeries = [
        _FORGE.format(payload=_RUN_IN_SERVER.format(marker=marker)),
        _FORGE.format(payload=_FULL_MARKS),
        _FORGE.format(payload=_REASON),
    ]
    gold = _gold("easy", 1)[0]
    outs = []
    url = served[0]
    with httpx.Client(base_url=url, timeout=300) as c:
        for i, forgery in enumerate(forgeries):
            outs.append(_submit(c, KEY_A, "countdown", "test", i, _code(forgery)))
            _submit(c, KEY_B, "reasoning_mix", "easy", 0, gold)  # replaces a worker the forgery ended
        health = c.get("/health").json()
    assert not marker.exists(), "the answer's code ran in the server"
    for out in outs:
        assert _not_full_marks(out), out
        assert "PWNED" not in json.dumps(out)
        assert out["reward"] is None and "tried to run code" in out["metadata"]["reason"], out
    assert health == {"status": "ok", "confinement": "bubblewrap"}


def test_one_keys_answers_cannot_change_another_keys_grades(
    served: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    gold = _gold("easy", 6)
    with httpx.Client(base_url=served[0], timeout=300) as c:
        before = [_submit(c, KEY_B, "reasoning_mix", "easy", i, g)["reward"] for i, g in enumerate(gold[:2])]
        poisoned = [_submit(c, KEY_A, "countdown", "test", i, _code(_POISON)) for i in range(3)]
        after = [_submit(c, KEY_B, "reasoning_mix", "easy", i, g)["reward"] for i, g in enumerate(gold)]
        chosen = _submit(c, KEY_B, "reasoning_mix", "easy", 0, "abracadabra")
    assert before == [1.0, 1.0]
    assert after == [1.0] * 6, after
    assert chosen["reward"] == 0.0
    assert all(_not_full_marks(p) for p in poisoned)


def test_a_process_that_exits_after_replying_costs_nobody_else_a_grade(
    served: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    gold = _gold("easy", 3)
    with httpx.Client(base_url=served[0], timeout=300) as c:
        _submit(c, KEY_A, "countdown", "test", 0, _code(_EXIT_LATER))
        time.sleep(1.0)  # the old worker, back in the idle pool, is dead by now
        honest = [_submit(c, KEY_B, "reasoning_mix", "easy", i, g) for i, g in enumerate(gold)]
    assert [h["reward"] for h in honest] == [1.0] * 3, [h["metadata"] for h in honest]


def test_fork_and_memory_bombs_are_stopped_and_leave_nothing_behind(
    served: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    url, proc, _ = served
    with httpx.Client(base_url=url, timeout=300) as c:
        _submit(c, KEY_B, "reasoning_mix", "easy", 0, _gold("easy", 1)[0])  # the workers are up
        baseline = len(_descendants(proc.pid))
        answered: list[int] = []
        stop = threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=url, timeout=60) as p:
                while not stop.is_set():
                    answered.append(p.get("/health").status_code)
                    time.sleep(0.05)

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            bombs = [
                _submit(c, KEY_A, "countdown", "test", 3, _code(_FORK_BOMB)),
                _submit(c, KEY_A, "countdown", "test", 4, _code(_MEMORY_BOMB)),
            ]
        finally:
            stop.set()
            prober.join()
        time.sleep(1.0)
        left = _descendants(proc.pid)
        honest = _submit(c, KEY_B, "reasoning_mix", "easy", 0, _gold("easy", 1)[0])
    assert len(left) <= baseline, (baseline, len(left))  # no process outlives its answer
    assert _rss_mb(left) < 1500
    assert answered and set(answered) == {200}  # /health answered throughout
    assert all(b["reward"] is None for b in bombs), bombs
    assert honest["reward"] == 1.0


@contextlib.contextmanager
def _serve_logged(*args: str, env: dict[str, str]) -> Iterator[tuple[str, Path, Path]]:
    """``envbuilder serve ARGS`` with its output in files: its URL, stdout and stderr."""
    with tempfile.TemporaryDirectory(prefix="eb-logs-") as folder:
        out, err = Path(folder) / "out", Path(folder) / "err"
        with serve_process(*args, env=env, stdout=out, stderr=err, ready_timeout=READY) as (url, _):
            yield url, out, err


def test_the_start_up_lines_say_the_checkers_run_confined(
    served: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    assert "envbuilder: checkers that evaluate answers run confined: bubblewrap" in served[2].read_text()


def test_without_bubblewrap_serve_refuses_unless_allowed(tmp_path: Path) -> None:
    spec = tmp_path / "countdown.yaml"
    spec.write_text(COUNTDOWN)
    no_bwrap = {"PATH": str(tmp_path / "bin")}  # nothing on it, bwrap included
    refused = subprocess.run(
        [sys.executable, "-m", "envbuilder", "serve", str(spec), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **no_bwrap},
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "evaluates answers as code, which runs only confined" in refused.stderr
    assert "`bwrap`" in refused.stderr and "--allow-unconfined-checkers" in refused.stderr
    # Allowed: it starts, says so loudly, /health shows it, and the guard still refuses code.
    marker = tmp_path / "written"
    with (
        _serve_logged(str(spec), "--allow-unconfined-checkers", env=no_bwrap) as (url, _, err),
        httpx.Client(base_url=url, timeout=300) as c,
    ):
        assert "WARNING: checkers that evaluate answers run UNCONFINED" in err.read_text()
        assert c.get("/health").json() == {"status": "ok", "confinement": "off"}
        h = {"X-Session-ID": uuid.uuid4().hex}
        assert c.post("/create", headers=h, json={"split": "test", "index": 0}).status_code == 200
        answer = _code(f"open({str(marker)!r}, 'w').write('x')")
        r = c.post("/countdown/call", headers=h, json={"name": "submit", "input": {"answer": answer}})
        out = json.loads([x for x in r.text.splitlines() if x.startswith("data: ")][-1][6:])["output"]
    assert not marker.exists() and out["reward"] is None, out
    # The shipped GSM8K evaluates nothing: served anywhere, /health is the reference's.
    with serve_process(str(ENVS / "gsm8k.yaml"), env=no_bwrap, ready_timeout=READY) as (url, _):
        assert httpx.get(url + "/health").json() == {"status": "ok"}
