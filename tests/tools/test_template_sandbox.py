"""Hostile templates in tools are refused like prompt templates: at load time when the private
name is literal, at call time (as an error output) when it is built while rendering."""

from __future__ import annotations

import pytest

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.errors import SpecError
from envbuilder.spec import parse_spec
from tests.tools.conftest import HERE

SPEC = """
name: hostile
dataset: {type: jsonl, files: {test: data/qa.jsonl}}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
tools:
  - type: template
    name: peek
    input: {}
    template: %s
"""


async def test_a_name_built_at_render_time_is_refused_in_the_output() -> None:
    env = Environment(parse_spec(SPEC % "\"{{ cycler['__in' ~ 'it__'] }}\"", file="h.yaml", base_dir=HERE))
    out = await env.call_tool(Episode(task=env.split("test").task(0)), "peek", {})
    assert out.model_dump()["output"]["blocks"][0]["text"] == (
        "Error: 'peek' failed: peek.template: refused by the template sandbox: "
        "access to attribute '__init__' of 'type' object is unsafe"
    )


def test_a_literal_private_name_is_refused_at_load() -> None:
    with pytest.raises(SpecError) as info:
        Environment(parse_spec(SPEC % '"{{ question.__class__ }}"', file="h.yaml", base_dir=HERE))
    assert str(info.value) == (
        "h.yaml:11:15 tools[0].template: peek.template: reads the private attribute '__class__', "
        "which the template sandbox refuses. Templates may only read the task's fields"
    )
