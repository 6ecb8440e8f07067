"""Composite graders, the registry, and nested grader blocks in a spec."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.environment import Environment
from envbuilder.errors import SpecError
from envbuilder.graders import Outcome, graders
from envbuilder.spec import json_schema, parse_spec
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, completion
from tests.graders._util import make

NUMBER = {"type": "exact_match", "target": "{{ answer }}", "extract": "number"}
WORD = {"type": "regex", "pattern": "(?i)thirty-six"}
TASK = {"question": "18 ducks: how many legs?", "answer": "36"}


def test_builtins_register_through_entry_points() -> None:
    assert graders.names() == sorted(
        [
            "actions",
            "all",
            "any",
            "cascade",
            "choice",
            "communicated",
            "exact_match",
            "harbor_tests",
            "llm_judge",
            "math",
            "reasoning_gym",
            "regex",
            "repo_tests",
            "state_match",
            "unit_tests",
            "weighted_mean",
        ]
    )


async def test_weighted_mean_all_any() -> None:
    mean = make({"type": "weighted_mean", "graders": [NUMBER, WORD], "weights": [3, 1]})
    result = await mean.grade("36 (thirty-six)", TASK, {})
    assert result.outcome is Outcome.CORRECT and result.score == 1.0
    result = await mean.grade("36", TASK, {})
    assert result.score == pytest.approx(0.75)
    assert [g["outcome"] for g in result.details["graders"]] == ["correct", "incorrect"]
    assert (await mean.grade("no idea", TASK, {})).outcome is Outcome.UNGRADEABLE

    both = make({"type": "all", "graders": [NUMBER, WORD]})
    assert (await both.grade("36 thirty-six", TASK, {})).outcome is Outcome.CORRECT
    assert (await both.grade("36", TASK, {})).outcome is Outcome.INCORRECT
    assert (await both.grade("thirty-six", TASK, {})).outcome is Outcome.UNGRADEABLE

    either = make({"type": "any", "graders": [NUMBER, WORD]})
    assert (await either.grade("thirty-six", TASK, {})).outcome is Outcome.CORRECT
    assert (await either.grade("35", TASK, {})).outcome is Outcome.INCORRECT
    assert (await either.grade("no idea", TASK, {})).outcome is Outcome.UNGRADEABLE


def test_weights_must_fit() -> None:
    with pytest.raises(ValueError, match="one weight per grader"):
        make({"type": "weighted_mean", "graders": [NUMBER, WORD], "weights": [1]})


async def test_cascade_calls_the_judge_only_when_the_rule_fails() -> None:
    with ChatServer(lambda body, i: (200, completion("VERDICT: CORRECT"), {})) as server:
        judge = {"type": "llm_judge", "base_url": server.base_url, "model": "m", "reference": "{{ answer }}"}
        cascade = make({"type": "cascade", "graders": [NUMBER, judge]})
        assert cascade.blocking
        assert cascade.fields == {"answer"}
        ruled = await cascade.grade("The answer is 36.", TASK, {})
        assert len(server.requests) == 0
        assert ruled.details["decided_by"] == 0
        judged = await cascade.grade("thirty-six legs", TASK, {})  # no number: the rule cannot tell
        wrong = await cascade.grade("35", TASK, {})  # the rule says no: ask the judge
        await cascade.aclose()
    assert len(server.requests) == 2
    assert ruled.outcome is judged.outcome is wrong.outcome is Outcome.CORRECT
    assert judged.details["decided_by"] == 1
    assert [g["type"] for g in judged.details["graders"]] == ["exact_match", "llm_judge"]
    assert judged.details["graders"][1]["judge"]["verdict"] == "CORRECT"


async def test_cascade_decisive_outcomes() -> None:
    cascade = make({"type": "cascade", "decisive": ["correct", "incorrect"], "graders": [NUMBER, WORD]})
    assert (await cascade.grade("35", TASK, {})).outcome is Outcome.INCORRECT  # decided by the rule
    assert (await cascade.grade("thirty-six", TASK, {})).outcome is Outcome.CORRECT  # rule could not tell


SPEC = """\
name: t
dataset:
  type: parquet
  files: {test: data/gsm8k/test-00000-of-00001.parquet}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader:
  type: cascade
  graders:
    - type: exact_match
      target: "{{ answer.split('####')[-1] }}"
      extract: number
    - type: any
      graders:
%s
"""


def _errors(inner: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        Environment(parse_spec(SPEC % inner, file="t.yaml", base_dir=ENVS))
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        (
            "        - {type: regx, pattern: x}",
            "t.yaml:15:12 grader.graders[1].graders[0].type: unknown type 'regx' Did you mean 'regex'?",
        ),
        (
            "        - {type: regex, patern: x}",
            "t.yaml:15:25 grader.graders[1].graders[0].patern: unknown key 'patern' Did you mean 'pattern'?",
        ),
        (
            "        - {type: regex, pattern: '(x'}",
            "t.yaml:15:34 grader.graders[1].graders[0].pattern: invalid regular expression: "
            "missing ) at position 2",
        ),
        (
            "        - {type: llm_judge, base_url: 'http://x', model: m, api_key: sk-123}",
            "t.yaml:15:61 grader.graders[1].graders[0].api_key: unknown key 'api_key' "
            "Did you mean 'api_key_env'?",
        ),
        (
            "        - {type: weighted_mean, graders: [{type: regex, pattern: x}], weights: [1, 2]}",
            "t.yaml:15:11 grader.graders[1].graders[0]: give one weight per grader (1), not 2",
        ),
        (
            "        - {type: exact_match, target: x, extract: {pattern: '(a)', group: 3}}",
            "t.yaml:15:75 grader.graders[1].graders[0].extract.group: the pattern has no group 3. "
            "It has 1 numbered group(s)",
        ),
    ],
)
def test_nested_errors_are_located(inner: str, expected: str) -> None:
    assert "\n".join(_errors(inner)) == expected


def test_nested_spec_compiles_and_json_schema_is_recursive() -> None:
    env = Environment(parse_spec(SPEC % "        - {type: regex, pattern: x}", file="t.yaml", base_dir=ENVS))
    assert not env.is_blocking("submit")
    schema = json_schema()
    defs = schema["$defs"]
    cascade: dict[str, Any] = defs["CascadeConfig"]
    nested = cascade["properties"]["graders"]["items"]
    refs = {v.rsplit("/", 1)[-1] for v in nested["discriminator"]["mapping"].values()}
    assert {"CascadeConfig", "ExactMatchConfig", "LLMJudgeConfig", "MathConfig"} <= refs
    assert "Grader patterns" not in str(schema)
    judge = defs["LLMJudgeConfig"]["properties"]
    assert "never goes in the spec" in judge["api_key_env"]["description"]
