"""A small bank: a state document, declarative and Python tools over it, and agent graders."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuilder.environment import Environment
from envbuilder.spec import parse_spec

DATA = Path(__file__).parent / "data"

SPEC = """
name: bank
dataset: {type: jsonl, files: {test: tasks.jsonl}}
splits: {test: {type: test}}
task: {id: id}
state: {file: bank.json, field: initial_state}
prompt: {template: "{{ question }}"}
submit: {name: send_message, answer_field: message}
grader:
  type: all
  graders:
    - {type: state_match}
    - {type: communicated, info: tell}
gold_actions: actions
gold: "{{ tell | join(' ') }}"
tools:
  - type: state
    name: find_account
    input: {owner: {description: The owner's name.}}
    op: find
    path: accounts
    where: {owner: "{owner}"}
    not_found: No account for {owner}
  - type: state
    name: get_account
    input: {account: {}}
    op: get
    path: accounts/{account}
    not_found: No account {account}
  - type: state
    name: unfreeze
    input: {account: {}}
    op: set
    path: accounts/{account}/frozen
    value: false
    require:
      - {path: "accounts/{account}", error: "No account {account}"}
      - {path: "accounts/{account}/frozen", equals: true, error: "Account {account} is not frozen"}
    output: Account {account} unfrozen.
  - type: state
    name: note
    input: {account: {}, text: {}}
    op: append
    path: accounts/{account}/log
    value: "note: {text}"
  - type: state
    name: close
    input: {account: {}}
    op: remove
    path: accounts/{account}
    require:
      - {path: "accounts/{account}/balance", one_of: [0], error: "Only an empty account can be closed"}
  - {type: function, module: bank.py, name: transfer}
  - {type: function, module: bank.py, name: total}
  - {type: function, module: bank.py, name: echo_tags, function: tags}
"""


def bank_env(extra: str = "", replace: tuple[str, str] | None = None) -> Environment:
    text = SPEC + extra
    if replace is not None:
        text = text.replace(*replace)
    return Environment(parse_spec(text, file="bank.yaml", base_dir=DATA))


@pytest.fixture(scope="module")
def bank() -> Environment:
    return bank_env()
