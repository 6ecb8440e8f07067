"""A run's summary: which episodes each figure is over, and when a run has no score at all."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.eval._results import summarize, unscored


def episode(index: int, outcome: str, sample: int = 0) -> dict[str, Any]:
    """An episode record that ended as ``outcome``."""
    base: dict[str, Any] = {"split": "test", "index": index, "sample": sample, "status": "finished",
                            "finished": True, "reward": None}  # fmt: skip
    if outcome in ("correct", "incorrect"):
        return {**base, "correct": outcome == "correct", "reward": 1.0 if outcome == "correct" else 0.0}
    if outcome in ("void", "ungradeable"):
        return {**base, "ungradeable": True, "metadata": {"void": True} if outcome == "void" else {}}
    if outcome == "no_answer":
        return {**base, "status": "max_turns", "finished": False}
    return {**base, "status": "error", "finished": False, "error": "HTTP 503", "error_reason": "HTTP 503"}


def test_pass_at_k_is_over_graded_episodes_as_accuracy_is() -> None:
    """An errored or void sample is no failed attempt: task 0 was right every time it was graded."""
    s = summarize([episode(0, "correct", 0), episode(0, "error", 1),
                   episode(1, "incorrect", 0), episode(1, "void", 1)])  # fmt: skip
    assert s.pass_at == {1: 0.5} and s.accuracy.mean == 0.5
    assert summarize([episode(i, "error") for i in range(4)]).pass_at == {}


@pytest.mark.parametrize(
    ("outcomes", "why"),
    [
        (["error"] * 4, "void: no episode was graded (4 error)"),
        (["void"] * 3 + ["ungradeable"], "void: no episode was graded (1 ungradeable, 3 void)"),
        (["void", "error"], "void: no episode was graded (1 void, 1 error)"),
        (["error", "incorrect"], None),
        (["no_answer", "error"], None),  # running out of turns is the agent's own failure
        ([], None),
    ],
)
def test_a_run_with_nothing_graded_has_no_score(outcomes: list[str], why: str | None) -> None:
    s = summarize(episode(i, o) for i, o in enumerate(outcomes))
    assert unscored(s.outcomes) == why
    assert s.scored is (why is None)


def test_the_mean_over_all_says_what_it_is_over() -> None:
    s = summarize(episode(i, o) for i, o in enumerate(["correct", "incorrect", "void", "void", "error"]))
    assert s.reward_all_label == "mean reward, all 3 episodes (2 void left out) (none = 0)"
    assert s.reward_all.n == 3
    assert summarize([episode(0, "correct")]).reward_all_label == "mean reward, all 1 episodes (none = 0)"
