"""Build a grader from a YAML-like dict, as a spec's `grader:` block is validated."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from envbuilder.graders import Grade, Grader, GraderContext, build_grader
from envbuilder.spec._models import GraderField

_ADAPTER: TypeAdapter[Any] = TypeAdapter(GraderField)


def make(block: dict[str, Any]) -> Grader:
    return build_grader(_ADAPTER.validate_python(block), GraderContext())


async def grade(
    grader: Grader, answer: str, task: dict[str, Any], secrets: dict[str, str] | None = None
) -> Grade:
    return await grader.grade(answer, task, secrets or {})
