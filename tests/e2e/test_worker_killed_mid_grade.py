"""A grading worker killed mid-grade (the kernel's OOM killer, an operator's `kill -9`): the
episode is void (reward null, `metadata.void` says why), never 0, and the server keeps serving.

`envbuilder serve math500.yaml` runs as a real process; an answer whose check holds the
worker for seconds (`9^{9^{9^{9}}}` is one big-integer power) is submitted, and the process
forked for that one check (envbuilder/processes: a zygote's child) is killed while it works.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx

from envbuilder.client import Client
from envbuilder.environment import load_environment
from envbuilder.protocol import ToolOutput
from tests.conftest import ENVS
from tests.processes import serve_process

#: Past the length the grader decides in the server's own process (math's MAX_INLINE_CHARS).
PROSE = "Let me work through it step by step. " * 60
SLOW = PROSE + r"The answer is $\boxed{9^{9^{9^{9}}}}$."


def _children() -> dict[int, int]:
    """Every process's parent: pid → ppid."""
    out: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            out[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def _descendants(root: int) -> set[int]:
    parents = _children()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _grade(url: str, answer: str, into: list[ToolOutput]) -> None:
    with (
        Client(url, timeout=120) as client,
        client.environment("math500").session(split="test", index=0) as s,
    ):
        into.append(s.call_tool("submit", {"answer": answer}))


def test_a_worker_killed_mid_grade_voids_the_episode_and_the_server_goes_on() -> None:
    gold = load_environment(ENVS / "math500.yaml").split("test").task(0)["answer"]
    with serve_process(str(ENVS / "math500.yaml")) as (url, proc):
        warm: list[ToolOutput] = []
        _grade(url, PROSE + rf"The answer is $\boxed{{{gold}}}$.", warm)
        assert warm[0].reward == 1.0  # the grading pool is up (its zygotes are running)
        before = _descendants(proc.pid)
        outputs: list[ToolOutput] = []
        call = threading.Thread(target=_grade, args=(url, SLOW, outputs))
        call.start()
        killed: set[int] = set()
        deadline = time.monotonic() + 60
        while not killed and call.is_alive() and time.monotonic() < deadline:
            parents = _children()
            # the child forked for this check: new, and its parent is a zygote that was there
            for pid in _descendants(proc.pid) - before:
                if parents.get(pid) in before:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
            time.sleep(0.02)
        call.join(120)
        assert killed, "no worker process was seen checking the answer"
        [out] = outputs
        assert out.finished is True
        assert out.reward is None  # void, never 0
        assert out.metadata is not None and out.metadata["outcome"] == "ungradeable"
        assert "could not be checked" in out.metadata["void"], out.metadata
        assert proc.poll() is None
        assert httpx.get(url + "/health", timeout=30).status_code == 200
        again: list[ToolOutput] = []
        _grade(url, PROSE + rf"So the answer is $\boxed{{{gold}}}$.", again)
        assert again[0].reward == 1.0  # a fresh process checks the next answer
