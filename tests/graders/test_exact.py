from __future__ import annotations

import asyncio

import pytest

from envbuilder.graders import GraderContext, Outcome
from envbuilder.graders._exact import ExactMatchConfig, ExactMatchGrader
from envbuilder.graders._normalize import canonical_number, extract_number

TASK = {"answer": "work...\n#### 72", "big": "#### 1,000"}


def grade(answer: str, target: str = "{{ answer.split('####')[-1] }}", **cfg: object):
    config = ExactMatchConfig.model_validate(
        {"type": "exact_match", "target": target, "extract": "number", **cfg}
    )
    grader = ExactMatchGrader(config, GraderContext())
    return asyncio.run(grader.grade(answer, TASK, {}))


@pytest.mark.parametrize(
    "answer",
    [
        "72",
        " 72 ",
        "72.0",
        "$72",
        "$72.00",
        "The answer is 72.",
        "**72**",
        "72 apples",
        "I think 8*9 = 72",
        "\\boxed{72}",
        "The answer is 72 (from 8 and 9).",
    ],
)
def test_forms_models_write_are_correct(answer: str) -> None:
    assert grade(answer).outcome is Outcome.CORRECT


def test_thousands_separator() -> None:
    assert grade("1000", target="{{ big.split('####')[-1] }}").outcome is Outcome.CORRECT
    assert grade("1,000", target="{{ big.split('####')[-1] }}").outcome is Outcome.CORRECT


def test_wrong_and_ungradeable() -> None:
    assert grade("71").outcome is Outcome.INCORRECT
    g = grade("I don't know")
    assert g.outcome is Outcome.UNGRADEABLE and g.score is None


@pytest.mark.parametrize(
    ("text", "canon"),
    [
        ("72.0", "72"),
        ("$1,000.50", "1000.5"),
        ("-3", "-3"),
        ("+4", "4"),
        ("abc", None),
        ("1e3", "1000"),
        ("2.5e1", "25"),
        ("25/1", "25"),
        ("6/8", "0.75"),
        ("1/3", "1/3"),
        ("1/0", None),
        ("1e999999999", None),  # exact arithmetic on it would never end: not read
        # 29+ digits: exact (Decimal's 28-digit context raised here, or rounded two apart).
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        ("1234567890123456789012345678901234.5", "1234567890123456789012345678901234.5"),
        # Plain integers (read without a Fraction): the same answers as the exact path.
        ("025", "25"),
        ("-007", "-7"),
        ("−5", "-5"),
        ("1,000", "1000"),
        ("12.", "12"),
        ("--4", None),
        ("-", None),
        ("٣", "3"),  # another script's digit: the exact path reads it
        ("1" * 1000, "1" * 1000),
        ("1" * 1001, None),  # longer than the graders read
        ("-" + "1" * 1000, None),
    ],
)
def test_canonical_number(text: str, canon: str | None) -> None:
    assert canonical_number(text) == canon


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The answer is 2.5e1.", "2.5e1"),
        ("so 25/1.", "25/1"),
        ("\\boxed{144/2}", "144/2"),
        ("#### 1,234", "1,234"),
    ],
)
def test_extract_number_reads_exponents_and_fractions(text: str, number: str) -> None:
    assert (extract_number(text) or "").strip() == number


def test_long_numbers_one_apart_do_not_match() -> None:
    long = "123456789012345678901234567890"
    assert grade("123456789012345678901234567891", target=long).outcome is Outcome.INCORRECT
    assert grade(long, target=long).outcome is Outcome.CORRECT


def test_extract_prefers_stated_answer() -> None:
    assert extract_number("The answer is 5. Check: 2+3=5, 10 total items") == "5"


def test_negative_zero_is_zero() -> None:
    assert canonical_number("-0") == "0"
    assert canonical_number("0.00") == "0"


async def test_regex_extraction_group_first_last_fallback() -> None:
    from tests.graders._util import make

    def grader(**extract: object):
        return make(
            {"type": "exact_match", "target": "{{ t }}", "extract": {"pattern": r"ANSWER: (\w+)", **extract}}
        )

    text = "ANSWER: cat ... on reflection ANSWER: dog"
    assert (await grader(group=1).grade(text, {"t": "dog"}, {})).outcome is Outcome.CORRECT
    assert (await grader(group=1, match="first").grade(text, {"t": "cat"}, {})).outcome is Outcome.CORRECT
    missing = await grader(group=1).grade("dog", {"t": "dog"}, {})
    assert missing.outcome is Outcome.UNGRADEABLE
    assert (await grader(group=1, fallback="whole").grade("dog", {"t": "dog"}, {})).outcome is Outcome.CORRECT
    numeric = await grader(group=1, fallback="number").grade("so 42.", {"t": "42"}, {})
    assert numeric.outcome is Outcome.CORRECT


def test_unknown_group_is_a_located_config_error() -> None:
    from envbuilder.graders import GraderConfigError
    from tests.graders._util import make

    with pytest.raises(GraderConfigError) as info:
        make({"type": "exact_match", "target": "x", "extract": {"pattern": r"(\d+)", "group": 2}})
    assert info.value.loc == ("extract", "group")


@pytest.mark.parametrize(
    ("names", "text", "expected"),
    [
        (["lower", "punctuation", "whitespace"], " The  Eiffel-Tower! ", "the eiffeltower"),
        (["currency", "thousands", "strip"], " $1,234,567 ", "1234567"),
        (["leading_zeros"], "007 and 0.5 and 100", "7 and 0.5 and 100"),
        (["number"], "1e3", "1000"),
        (["number"], "72.50", "72.5"),
        (["unicode"], "７２", "72"),
    ],
)
def test_normalizers(names: list[str], text: str, expected: str) -> None:
    from envbuilder.graders._normalize import normalize

    assert normalize(text, names) == expected


async def test_list_of_targets_and_leading_zeros() -> None:
    from tests.graders._util import make

    # AIME answers are strings with leading zeros ("025").
    g = make(
        {
            "type": "exact_match",
            "target": ["{{ answer }}", "{{ alt }}"],
            "normalize": ["strip", "leading_zeros"],
        }
    )
    task = {"answer": "025", "alt": "twenty-five"}
    assert (await g.grade("25", task, {})).outcome is Outcome.CORRECT
    assert (await g.grade("twenty-five", task, {})).outcome is Outcome.CORRECT
    assert (await g.grade("26", task, {})).outcome is Outcome.INCORRECT


@pytest.mark.parametrize(
    "answer",
    ["The answer is 72.", "**72**", "$72.00", "72 apples", "#### 72", "Final answer: 72"],
)
def test_gsm8k_rows(answer: str) -> None:
    # Real GSM8K reference solutions, graded as envs/gsm8k.yaml does.
    import pyarrow.parquet as pq

    from tests.conftest import ENVS

    rows = pq.read_table(ENVS / "data/gsm8k/test-00000-of-00001.parquet").slice(0, 20).to_pylist()
    config = ExactMatchConfig.model_validate(
        {"type": "exact_match", "target": "{{ answer.split('####')[-1] }}", "extract": "number"}
    )
    grader = ExactMatchGrader(config, GraderContext())
    for row in rows:
        target = row["answer"].split("####")[-1].strip()
        given = answer.replace("72", target)
        result = asyncio.run(grader.grade(given, row, {}))
        assert result.outcome is Outcome.CORRECT, (given, target)
