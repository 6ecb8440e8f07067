"""The `harbor_tests` grader's verdict: the reward file read as Harbor reads it (reward.json
first, else reward.txt), and every failure outside the agent's work void, never 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuilder.graders._harbor import verdict
from envbuilder.isolation.sandbox._result import RunResult, Status
from envbuilder.isolation.sandbox._session_image import local_from
from envbuilder.isolation.sandbox._verifier import VerifierRun


def _run(
    files: dict[str, bytes], status: Status = Status.OK, oversized: list[str] | None = None
) -> VerifierRun:
    result = RunResult(status=status, exit_code=0, stdout="ok\n", stderr="", seconds=0.1)
    return VerifierRun(result, files, oversized or [])


@pytest.mark.parametrize(
    ("files", "score"),
    [
        ({"reward.txt": b"1\n"}, 1.0),
        ({"reward.txt": b"0"}, 0.0),
        ({"reward.txt": b" 0.25 \n"}, 0.25),
        ({"reward.json": b'{"reward": 1.0, "cases_passed": 3}'}, 1.0),
        ({"reward.json": b'{"accuracy": 0.5}'}, 0.5),  # its only value
        ({"reward.json": b"0"}, 0.0),  # a bare number
        # reward.json wins over reward.txt, as in Harbor's verifier.
        ({"reward.json": b'{"reward": 0}', "reward.txt": b"1"}, 0.0),
    ],
)
def test_the_reward_file_gives_the_score(files: dict[str, bytes], score: float) -> None:
    grade = verdict(_run(files))
    assert grade.score == score and not grade.void


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (_run({}), "the tests wrote no reward file"),
        (_run({"reward.txt": b"  \n"}), "the tests wrote an empty reward.txt"),
        (_run({"reward.txt": b"pass"}), "the tests' reward.txt is not a number: 'pass'"),
        (_run({"reward.txt": b"nan"}), "not finite"),
        (_run({"reward.json": b"{"}), "the tests' reward.json is not JSON"),
        (_run({"reward.json": b'{"reward": "1"}'}), "no finite number: '1'"),
        (_run({"reward.json": b'{"a": 1, "b": 0}'}), "holds 2 rewards and none is named `reward`"),
        (_run({"reward.txt": b"3"}), "the tests' reward 3.0 is outside [0, 1]"),
        (_run({"reward.txt": b"1"}, Status.TIMEOUT), "the tests ran past their time limit"),
        (_run({}, oversized=["reward.txt"]), "reward.txt is larger than 64 KiB"),
    ],
)
def test_a_failure_of_the_tests_is_void_never_zero(run: VerifierRun, reason: str) -> None:
    grade = verdict(run)
    assert grade.score is None and grade.void
    assert reason in grade.reason


def test_a_from_the_engine_lacks_is_read_as_the_local_base() -> None:
    dockerfile = (
        "FROM python:3.12-slim AS build\nRUN true\n"
        "FROM --platform=linux/amd64 ubuntu:24.04\nCOPY --from=build /x /x\n"
        "FROM build\nFROM envbuilder-base:bookworm\nfrom scratch\n"
    )
    out, replaced = local_from(dockerfile, {"envbuilder-base:bookworm"}, "envbuilder-base:bookworm")
    assert replaced == ["python:3.12-slim", "ubuntu:24.04"]
    assert out == (
        "FROM envbuilder-base:bookworm AS build\nRUN true\n"
        "FROM --platform=linux/amd64 envbuilder-base:bookworm\nCOPY --from=build /x /x\n"
        "FROM build\nFROM envbuilder-base:bookworm\nfrom scratch\n"
    )


@pytest.mark.parametrize("workdir", ["/", "/logs", "/tests"])
async def test_a_working_folder_holding_the_tests_or_the_verdict_is_refused(workdir: str) -> None:
    from envbuilder.errors import SandboxError
    from envbuilder.isolation.sandbox import ContainerSpec, SessionContainers
    from envbuilder.isolation.sandbox._verifier import run_verifier

    spec = ContainerSpec(image="envbuilder-base:bookworm", workdir=workdir)
    containers = SessionContainers(spec, Path("."))
    with pytest.raises(SandboxError, match="which the tests' run makes afresh"):
        await run_verifier(containers, "envbuilder-base:bookworm", None, b"", ["true"])
