"""A small bank: a state document, declarative and Python tools over it, and agent graders."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuilder.environment import Environment
from envbuilder.spec import parse_spec

DATA = Path(__file__).parent / "data"

SPEC = (DATA / "bank.yaml").read_text()


def bank_env(extra: str = "", replace: tuple[str, str] | None = None) -> Environment:
    text = SPEC + extra
    if replace is not None:
        text = text.replace(*replace)
    return Environment(parse_spec(text, file="bank.yaml", base_dir=DATA))


@pytest.fixture(scope="module")
def bank() -> Environment:
    return bank_env()
