"""The built-in ``arithmetic`` generator: integer expressions with difficulty knobs.

A generator plugin as a third-party package would write one: registered in the
``envbuilder.generators`` entry-point group, called as ``arithmetic(config, seed, index)``.
"""

from __future__ import annotations

import random
from typing import Any

from envbuilder.data._generated import derive_seed

__all__ = ["arithmetic"]

_KNOBS = {"min_terms": 2, "max_terms": 3, "digits": 2, "ops": "+-"}


def arithmetic(config: dict[str, Any], seed: int, index: int) -> dict[str, Any]:
    """Row ``index``: ``{"question": "What is 12 + 7 * 3?", "answer": "33", "terms": 3}``.

    Config: ``min_terms``/``max_terms`` (operands), ``digits`` (per operand), ``ops`` (a subset
    of ``+-*``); unknown keys are errors.
    """
    unknown = sorted(set(config) - set(_KNOBS))
    if unknown:
        raise ValueError(f"unknown config key {unknown[0]!r} (known: {', '.join(_KNOBS)})")
    knobs = {**_KNOBS, **config}
    lo, hi, digits, ops = knobs["min_terms"], knobs["max_terms"], knobs["digits"], str(knobs["ops"])
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= 50):
        raise ValueError("need whole numbers 1 <= min_terms <= max_terms <= 50")
    if not (isinstance(digits, int) and 1 <= digits <= 18):
        raise ValueError("`digits` must be a whole number from 1 to 18")
    if not ops or set(ops) - set("+-*"):
        raise ValueError("`ops` must be a non-empty subset of '+-*'")
    rng = random.Random(derive_seed(seed, index))
    terms = rng.randint(lo, hi)
    numbers = [rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1) for _ in range(terms)]
    expression, value = str(numbers[0]), 0
    sign, product = 1, numbers[0]  # `*` binds tighter: sum the signed products
    for n in numbers[1:]:
        op = rng.choice(ops)
        expression += f" {op} {n}"
        if op == "*":
            product *= n
        else:
            value += sign * product
            sign, product = (1 if op == "+" else -1), n
    value += sign * product
    return {"question": f"What is {expression}?", "answer": str(value), "terms": terms}
