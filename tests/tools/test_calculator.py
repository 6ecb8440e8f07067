"""The calculator evaluates arithmetic by walking a syntax tree, and refuses everything else."""

from __future__ import annotations

import pytest

from envbuilder.errors import ToolError
from envbuilder.tools._calculator import evaluate, format_number


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(48 / 2) * 3", 72.0),
        ("2 ** 10", 1024),
        ("-3 + +4", 1),
        ("7 // 2 + 7 % 2", 4),
        ("sqrt(16) + abs(-2)", 6.0),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("round(2.567, 2)", 2.57),
    ],
)
def test_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "a Call expression is not allowed"),
        ("__import__('os')", "calling '__import__' that way is not allowed"),
        ("x + 1", "the name 'x' is not allowed"),
        ("(1).__class__", "a Attribute expression is not allowed"),
        ("'a' * 3", "the literal 'a' is not allowed"),
        ("[1, 2]", "a List expression is not allowed"),
        ("9 ** 9 ** 9", "the exponent is too large"),
        ("10 ** 5000", "the result is too large"),
        ("1 / 0", "division by zero"),
        ("1 +", "not an arithmetic expression"),
        ("(-8) ** 0.5", "the result is not a real number"),
        ("sqrt(-1)", "cannot compute"),
        ("-" * 60 + "1", "nested too deeply"),
        ("-" * 9_000 + "1", "nested too deeply"),  # past the parser's own limit (MemoryError)
        ("1+" * 5_000 + "1", "longer than 10,000 characters"),  # seconds in the parser at 1 MB
    ],
)
def test_refusals_say_why(expression: str, message: str) -> None:
    with pytest.raises(ToolError) as info:
        evaluate(expression)
    assert message in str(info.value)


def test_numbers_are_printed_plainly() -> None:
    assert format_number(72.0, 12) == "72"
    assert format_number(0.1 + 0.2, 12) == "0.3"
    assert format_number(2**70, 12) == str(2**70)
