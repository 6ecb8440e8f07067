"""A small QA environment with every built-in tool, over tests/tools/data/qa.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuilder.environment import Environment
from envbuilder.spec import parse_spec

HERE = Path(__file__).parent

SPEC = """
name: qa-tools
dataset:
  type: jsonl
  files: {test: data/qa.jsonl}
splits:
  test: {type: test}
prompt:
  template: "{{ question }}"
submit:
  max_attempts: 2
  feedback: >-
    {% if outcome == 'correct' %}Right.{% else %}You said {{ grade.extracted }};
    {{ attempts_left }} left.{% endif %}
grader:
  type: exact_match
  target: "{{ answer }}"
tools:
  - type: calculator
    max_calls: 2
  - type: template
    name: hint
    input: {}
    template: "{{ hint }}"
    max_calls: 1
    cost: 0.25
  - type: template
    name: lookup
    description: Look a key up in the task's table.
    input:
      key: {type: string, enum: [fr, de, spider, cat], description: The key.}
    template: "{{ table[key] }}"
    task_scoped: true
  - type: retrieve
    name: search
    field: passages
    k: 2
  - type: template
    name: give_up
    input: {}
    template: "You gave up."
    terminal: true
"""


@pytest.fixture(scope="session")
def qa_env() -> Environment:
    return Environment(parse_spec(SPEC, file="qa.yaml", base_dir=HERE))
