"""The statistics on constructed runs, against values computed by hand."""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import pytest

from envbuilder.eval import clustered_mean, paired_difference, pass_at_k, summarize
from envbuilder.eval._stats import wilson


def episode(
    index: int,
    outcome: str,
    *,
    sample: int = 0,
    reward: float | None = None,
    level: str = "1",
    reason: str | None = None,
) -> dict[str, Any]:
    """A record as the runner writes it, for an episode that ended in ``outcome``."""
    if reward is None and outcome in ("correct", "incorrect"):
        reward = 1.0 if outcome == "correct" else 0.0
    return {
        "split": "test", "index": index, "sample": sample, "task": {"level": level},
        "status": "error" if outcome == "error" else ("max_turns" if outcome == "no_answer" else "finished"),
        "finished": outcome in ("correct", "incorrect", "ungradeable"),
        "ungradeable": outcome == "ungradeable", "correct": outcome == "correct", "reward": reward,
        "error_reason": reason, "turns": 1, "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }  # fmt: skip


@pytest.mark.parametrize(("n", "c", "k"), [(5, 0, 1), (5, 2, 1), (5, 2, 2), (5, 2, 4), (5, 4, 2), (10, 3, 5)])
def test_pass_at_k_is_the_share_of_k_subsets_with_a_correct_sample(n: int, c: int, k: int) -> None:
    samples = [True] * c + [False] * (n - c)
    subsets = list(combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))


def test_pass_at_k_needs_k_within_the_samples() -> None:
    with pytest.raises(ValueError, match="0 < k <= n"):
        pass_at_k(3, 1, 4)


def test_clustered_mean_with_one_sample_per_task_is_the_usual_standard_error() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0]
    e = clustered_mean(enumerate(values))
    mean = 0.6
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / 4)
    assert (e.mean, e.n) == (pytest.approx(mean), 5)
    assert e.stderr == pytest.approx(sd / math.sqrt(5))
    # 0/1 values: the Wilson interval of 3 in 5 (published value: 0.2307 to 0.8824)
    assert (e.low, e.high, e.method) == (
        pytest.approx(0.2307, abs=1e-4),
        pytest.approx(0.8824, abs=1e-4),
        "wilson",
    )


def test_clustering_widens_the_interval_of_correlated_samples() -> None:
    # two tasks, each answered the same way 4 times: 8 episodes but only 2 independent facts
    pairs = [("a", 1.0)] * 4 + [("b", 0.0)] * 4
    clustered = clustered_mean(pairs)
    naive = clustered_mean(enumerate(v for _, v in pairs))
    assert clustered.mean == naive.mean == 0.5
    assert clustered.stderr == pytest.approx(0.5)  # sd of task means (0.707) / sqrt(2)
    assert naive.stderr == pytest.approx(math.sqrt(2 / 7) / math.sqrt(8))
    assert clustered.stderr > 2.6 * naive.stderr


def test_paired_difference() -> None:
    d = paired_difference([(0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (0.0, 1.0)])
    assert (d.mean, d.n) == (0.5, 4)
    assert d.stderr == pytest.approx(math.sqrt(1 / 3) / 2)
    assert paired_difference([]).mean is None and paired_difference([(0, 1)]).stderr is None


def test_a_constructed_run_with_groups() -> None:
    records = [
        episode(0, "correct", level="1"), episode(1, "correct", level="1"),
        episode(2, "incorrect", level="1"), episode(3, "correct", level="2"),
        episode(4, "ungradeable", level="2"), episode(5, "no_answer", level="2"),
        episode(6, "error", level="2", reason="HTTP 429"), episode(7, "error", level="3", reason="HTTP 429"),
        episode(8, "error", reason="unreachable (ConnectError)"),
    ]  # fmt: skip
    s = summarize(records, group_by="level")
    ended = {"correct": 3, "incorrect": 1, "ungradeable": 1, "void": 0}
    assert s.outcomes == {**ended, "no_answer": 1, "error": 3}
    assert s.errors_by_reason == {"HTTP 429": 2, "unreachable (ConnectError)": 1}
    assert (s.reward_all.mean, s.reward_all.n) == (pytest.approx(3 / 9), 9)
    assert (s.reward_graded.mean, s.reward_graded.n) == (0.75, 4)
    assert s.reward_graded.stderr == pytest.approx(0.25)  # sd 0.5 / sqrt(4)
    assert s.pass_at == {1: 0.75}  # over the 4 graded, as accuracy: errors are no failed attempts
    assert (s.turns, s.prompt_tokens, s.completion_tokens) == (9, 27, 18)
    assert list(s.groups) == ["1", "2", "3"]
    one, two, three = s.groups.values()
    assert (one.episodes, one.reward_all.mean, one.accuracy.mean) == (4, 0.5, 2 / 3)
    # level 1: rewards 1,1,0,0 (the error of task 8 counts 0): s.e. sqrt(1/3)/2
    assert one.reward_all.stderr == pytest.approx(math.sqrt(1 / 3) / 2)
    assert (two.episodes, two.graded, two.reward_all.mean, two.errors) == (4, 1, 0.25, 1)
    assert (three.episodes, three.reward_all.mean, three.reward_all.stderr, three.accuracy.mean) == (
        1,
        0.0,
        None,
        None,
    )
    assert s.to_dict()["groups"]["2"]["outcomes"]["ungradeable"] == 1


def test_pass_at_k_over_samples_of_a_constructed_run() -> None:
    # 3 tasks × 3 samples, correct 0, 1 and 3 times
    correct = {0: 0, 1: 1, 2: 3}
    records = [
        episode(i, "correct" if s < c else "incorrect", sample=s)
        for i, c in correct.items()
        for s in range(3)
    ]
    s = summarize(records)
    assert set(s.pass_at) == {1, 2, 3}
    assert s.pass_at[1] == pytest.approx((0 + 1 / 3 + 1) / 3)
    assert s.pass_at[2] == pytest.approx((0 + (1 - 1 / 3) + 1) / 3)  # C(2,2)/C(3,2) = 1/3
    assert s.pass_at[3] == pytest.approx(2 / 3)
    # task means 0, 1/3, 1 → clustered s.e. = sd(task means) / sqrt(3)
    means = [0, 1 / 3, 1]
    m = sum(means) / 3
    assert s.reward_all.stderr == pytest.approx(
        math.sqrt(sum((x - m) ** 2 for x in means) / 2) / math.sqrt(3)
    )


def test_the_accuracy_interval_stays_within_0_and_1() -> None:
    s = summarize([episode(0, "correct"), episode(1, "incorrect")])
    assert 0 < s.accuracy.low < 0.5 < s.accuracy.high < 1  # Wilson: 1 of 2 is [0.095, 0.905]
    assert s.accuracy.few and s.accuracy.format() == "0.500 [0.095, 0.905] (few: 2 tasks)"


@pytest.mark.parametrize(("correct", "n"), [(2, 4), (3, 4), (4, 4), (0, 4), (1, 2), (20, 20), (0, 1)])
def test_intervals_of_proportions_never_leave_0_1_and_are_never_zero_width(correct: int, n: int) -> None:
    """The issue's cases: 0.500 [-0.066, 1.066], 0.750 [0.260, 1.240], 100 % as [1.000, 1.000]."""
    s = summarize([episode(i, "correct" if i < correct else "incorrect") for i in range(n)])
    for e in (s.reward_all, s.accuracy, s.pass_at_ci[1]):
        assert e.method == "wilson"
        assert 0 <= e.low <= e.mean <= e.high <= 1
        assert e.high - e.low > 0.1  # never printed as certain
    assert (
        summarize([episode(0, "correct")] * 1).accuracy.format(percent=True)
        == "100.0% [20.7%, 100.0%] (few: 1 task)"
    )


def test_rewards_that_are_not_0_or_1_get_a_clustered_bootstrap_within_the_range() -> None:
    rewards = [0.9, 1.0, 0.95, 1.0, 0.99, 0.97, 1.0, 0.92, 1.0, 0.98, 1.0, 0.96]
    s = summarize([episode(i, "correct", reward=r) for i, r in enumerate(rewards)])
    e = s.reward_graded
    assert e.method == "bootstrap, clustered" and not e.few
    assert min(rewards) <= e.low < e.mean < e.high <= 1.0  # the normal interval would reach past 1
    assert (
        summarize([episode(i, "correct", reward=r) for i, r in enumerate(rewards)]).reward_graded == e
    )  # seeded
    # two tasks, three samples each, rewards .5 and .8 each time: 2 tasks, a wide interval
    pairs = [("a", 0.5)] * 3 + [("b", 0.8)] * 3
    two = clustered_mean(pairs)
    assert (two.low, two.high, two.clusters, two.few) == (0.5, pytest.approx(0.8), 2, True)


def test_every_task_with_the_same_non_binary_reward_has_no_interval() -> None:
    e = clustered_mean([(i, 0.5) for i in range(5)])
    assert (e.mean, e.low, e.high) == (0.5, None, None)
    assert e.format() == "0.500 (no interval: 5 tasks)"


def test_clustered_proportions_use_the_effective_sample_size() -> None:
    # 2 tasks answered the same way 4 times each: Wilson on 2 independent facts, not 8
    pairs = [("a", 1.0)] * 4 + [("b", 0.0)] * 4
    clustered = clustered_mean(pairs)
    naive = clustered_mean(enumerate(v for _, v in pairs))
    assert clustered.method == "wilson, clustered"
    assert clustered.high - clustered.low > naive.high - naive.low
    assert (clustered.low, clustered.high) == pytest.approx(wilson(1, 2), abs=1e-9)
    # every sample of every task correct: each task counts once
    assert (clustered_mean([(t, 1.0) for t in "abc" for _ in range(5)]).low) == pytest.approx(wilson(3, 3)[0])


def test_wilson_against_published_values() -> None:
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert wilson(5, 10) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def test_paired_difference_is_cut_to_the_possible_range() -> None:
    d = paired_difference([(0.0, 1.0), (0.0, 1.0), (1.0, 1.0)])
    assert d.high == 1.0 and d.method == "normal, paired"  # the normal interval would pass 1
    assert paired_difference([(0.0, 1.0)] * 5).low is None  # no spread: not printed as certain
