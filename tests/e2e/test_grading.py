"""End to end: rewards you can trust. Each grading defect of issue 12, through a real server.

MATH-500 and GSM8K are served by uvicorn and answered with the reference ``ors-sdk`` client; the
judge test uses envbuilder's client (it sends the judge's key as a session secret) against the
local chat server; the missing-target test serves a Parquet file with null and empty answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.client import Client
from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.spec import parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.servers import serve_app

pytest.importorskip("math_verify")


@pytest.fixture(scope="module")
def math500_url() -> Iterator[str]:
    env = load_environment(ENVS / "math500.yaml")
    with serve_app(create_app([env], ServerSettings())) as url:
        yield url


def _submit_ors(url: str, env_name: str, index: int, answer: str) -> Any:
    from ors.client import ORS

    with ORS(base_url=url) as client, client.environment(env_name).session(split="test", index=index) as s:
        return s.call_tool("submit", {"answer": answer})


# Gold answers submitted verbatim (bare LaTeX, as a model puts them in the tool's `answer`),
# and the same row's wrong answers: a changed number, a sign flip, a dropped factor.
BARE = [
    (8, "3\\sqrt{13}", 1.0),
    (8, "3", 0.0),
    (8, "\\sqrt{13}", 0.0),
    (8, "-3\\sqrt{13}", 0.0),
    (0, "\\left( 3, \\frac{\\pi}{2} \\right)", 1.0),
    (0, "\\left( 3, \\frac{\\pi}{3} \\right)", 0.0),
    (15, "6 - 5i", 1.0),
    (15, "6 + 5i", 0.0),
    (154, "2\\sqrt{113}", 1.0),
    (154, "2\\sqrt{114}", 0.0),
    (17, "\\pi", 1.0),
    (14, "\\sqrt{51}", 1.0),
    (162, "\\dfrac{17}{50}", 1.0),
    (162, "\\frac{17}{50}", 1.0),
    (312, "(5,\\infty)", 1.0),
    (312, "[5,\\infty)", 0.0),
    (227, "\\text{(C)}", 1.0),
    (227, "(D)", 0.0),
]


@pytest.mark.parametrize(("index", "answer", "reward"), BARE)
def test_math500_bare_latex_answers(math500_url: str, index: int, answer: str, reward: float) -> None:
    out = _submit_ors(math500_url, "math500", index, answer)
    assert out.reward == reward, out.metadata
    assert out.metadata["outcome"] == ("correct" if reward else "incorrect")


@pytest.mark.parametrize(
    ("index", "answer", "reward"),
    [
        (488, "\\boxed{36}", 1.0),  # the target is \$36
        (488, "36 dollars", 1.0),
        (488, "$\\$36$", 1.0),
        (488, "\\boxed{37}", 0.0),
        (242, "\\boxed{32348}", 1.0),  # the target is \$32,\!348
        (242, "The final answer is $32,348$.", 1.0),
        (242, "\\$32,\\!349", 0.0),
    ],
)
def test_math500_dollar_amounts(math500_url: str, index: int, answer: str, reward: float) -> None:
    assert _submit_ors(math500_url, "math500", index, answer).reward == reward


def test_math500_unreadable_answer_is_ungradeable_with_a_reason(math500_url: str) -> None:
    out = _submit_ors(math500_url, "math500", 8, "\\frac{")
    assert out.reward is None
    assert out.metadata["outcome"] == "ungradeable"
    assert "could not be read as mathematics" in out.metadata["reason"]


@pytest.mark.parametrize(
    ("answer", "reward"),
    [("The answer is 7.2e1.", 1.0), ("72/1", 1.0), ("\\boxed{144/2}", 1.0), ("7.3e1", 0.0), ("73/1", 0.0)],
)
def test_gsm8k_number_extraction_reads_exponents_and_fractions(
    gsm8k_url: str, answer: str, reward: float
) -> None:
    # train[0]: Natalia sold 48 + 24 = 72 clips.
    from ors.client import ORS

    with ORS(base_url=gsm8k_url) as client, client.environment("gsm8k").session(split="train", index=0) as s:
        assert s.call_tool("submit", {"answer": answer}).reward == reward


def test_judge_caches_verdicts_never_unparseable_replies(judged: Callable[..., str]) -> None:
    def judge(body: dict[str, Any], i: int) -> tuple[int, dict[str, Any], dict[str, str]]:
        # The first reply states no verdict; after that the judge answers properly.
        return 200, completion("Hmm, hard to say." if i == 0 else "Matches.\nVERDICT: CORRECT"), {}

    with ChatServer(judge) as server:
        spec = judged(server.base_url, api_key_secret="JUDGE_KEY")
        env = Environment(parse_spec(spec, file="judged.yaml", base_dir=ENVS))
        with serve_app(create_app([env], ServerSettings())) as url, Client(url) as client:
            remote = client.environment("judged")

            def submit() -> Any:
                with remote.session(split="test", index=3, secrets={"JUDGE_KEY": "sk-test"}) as s:
                    return s.call_tool("submit", {"answer": "18"})

            first = submit()
            assert (first.reward, first.metadata["outcome"]) == (None, "ungradeable")
            assert "states no verdict" in first.metadata["reason"]
            second = submit()  # not served from the cache: the judge is asked again
            assert second.reward == 1.0 and second.metadata["judge"]["cached"] is False
            assert len(server.requests) == 2
            third = submit()  # the verdict was cached
            assert third.reward == 1.0 and third.metadata["judge"]["cached"] is True
            assert len(server.requests) == 2


MISSING_SPEC = """\
name: missing
dataset:
  type: parquet
  files: {test: rows.parquet}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader:
  type: %s
  target: "{{ answer }}"
"""


@pytest.mark.parametrize("grader", ["math", "exact_match", "choice"])
def test_null_or_empty_target_is_ungradeable_never_compared_with_none(tmp_path: Path, grader: str) -> None:
    table = pa.table({"question": ["q0", "q1", "q2"], "answer": [None, "  ", "B"]})
    pq.write_table(table, tmp_path / "rows.parquet")
    env = Environment(parse_spec(MISSING_SPEC % grader, file="missing.yaml", base_dir=tmp_path))
    with serve_app(create_app([env], ServerSettings())) as url, Client(url) as client:
        remote = client.environment("missing")

        def submit(index: int, answer: str) -> Any:
            with remote.session(split="test", index=index) as s:
                return s.call_tool("submit", {"answer": answer})

        null = submit(0, "None")
        assert (null.reward, null.metadata["outcome"]) == (None, "ungradeable")
        assert null.metadata["reason"] == "the task has no target: its field `answer` is null"
        empty = submit(1, "")
        assert (empty.reward, empty.metadata["outcome"]) == (None, "ungradeable")
        assert "renders empty" in empty.metadata["reason"]
        assert submit(2, "B").reward == 1.0
