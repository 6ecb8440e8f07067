"""Declarative tools as steps: typed inputs, several operations applied whole or not at all,
computed values, searches, generated ids and output shaping, over the small bank."""

from __future__ import annotations

import json
from typing import Any

import pytest

from envbuilder.environment import Environment, Episode
from envbuilder.errors import SpecError
from envbuilder.protocol import RunToolError, RunToolSuccess
from tests.agents.conftest import bank_env

TOOLS = """\
  - type: state
    name: deposit_many
    description: Deposit several amounts at once.
    input:
      entries:
        type: array
        max_items: 5
        items:
          type: object
          properties:
            account: {description: The account id.}
            amount: {type: number, minimum: 0.01}
      memo: {default: batch}
      kind: {enum: [cash, cheque], default: cash}
    steps:
      - for_each: entries
        as: entry
        steps:
          - {require: "entry.account in accounts_now", error: "No account {{ entry.account }}"}
          - {require: "not accounts_now[entry.account].frozen", error: "{{ entry.account }} is frozen"}
          - {increment: "accounts/{{ entry.account }}/balance", by: "{{ entry.amount }}", round: 2}
          - append: accounts/{{ entry.account }}/log
            value: "{{ '%s %+.2f %s' | format(kind, entry.amount, memo) }}"
    output: "{{ entries | sum(attribute='amount') }}"
  - type: state
    name: find_accounts
    input:
      frozen: {type: boolean}
      min_balance: {type: number, default: 0}
    steps:
      - find: accounts
        where: {frozen: "{frozen}"}
        if: item.balance >= min_balance
        all: true
  - type: state
    name: owner_of
    input: {account: {}}
    steps:
      - {get: "accounts/{account}", output: "{{ value.owner }}", not_found: "No account {account}"}
  - type: state
    name: open_account
    input: {owner: {}}
    steps:
      - {new_id: accounts, format: "a{n}", as: id}
      - set: accounts/{id}
        value: {owner: "{owner}", balance: 0, frozen: false, log: []}
      - {remove: "accounts/{id}/log/0", when: "false"}
    output: "{id}"
  - type: state
    name: owner_legacy
    input: {account: {}}
    op: get
    path: accounts/{account}/owner
    output: "Owner: {{ value }}"
  - type: state
    name: expensive
    input: {times: {type: integer}}
    steps:
      - let: {text: "{{ 'ab' * times }}"}
      - let: {bigger: "{{ text ~ text ~ text ~ text ~ text ~ text ~ text ~ text ~ text ~ text }}"}
    output: "{{ bigger | length }}"
  - type: state
    name: peek_class
    input: {}
    steps: []
    output: "{{ ''.__class__ }}"
"""
# The accounts as a name every step may read: bound by a first step of each tool that needs it.
TOOLS = TOOLS.replace(
    "      - for_each: entries\n",
    "      - {get: accounts, as: accounts_now}\n      - for_each: entries\n",
)


@pytest.fixture(scope="module")
def bank() -> Environment:
    return bank_env(TOOLS)


async def _call(env: Environment, episode: Episode, name: str, **args: Any) -> tuple[str, bool]:
    result = await env.call_tool(episode, name, args)
    assert isinstance(result, RunToolSuccess), result
    text = result.output.blocks[0].text  # type: ignore[union-attr]
    return text, bool(result.output.metadata and result.output.metadata.get("error"))


def _episode(env: Environment) -> Episode:
    return Episode(task=env.split("test").task(0))


async def test_array_and_object_inputs_with_defaults_run_every_step(bank: Environment) -> None:
    ep = _episode(bank)
    entries = [{"account": "a1", "amount": 10.5}, {"account": "a1", "amount": 0.25}]
    assert await _call(bank, ep, "deposit_many", entries=entries) == ("10.75", False)
    assert ep.state == {
        "items": {
            "accounts": {
                "a1": {
                    "owner": "Ann",
                    "balance": 110.75,
                    "frozen": False,
                    "log": ["cash +10.50 batch", "cash +0.25 batch"],
                }
            }
        }
    }


async def test_a_failing_step_changes_nothing_not_even_the_steps_before_it(bank: Environment) -> None:
    ep = _episode(bank)
    entries = [{"account": "a1", "amount": 10}, {"account": "a2", "amount": 1}]
    assert await _call(bank, ep, "deposit_many", entries=entries, memo="x") == (
        "Error: 'deposit_many' failed: a2 is frozen",
        True,
    )
    entries = [{"account": "a1", "amount": 10}, {"account": "zz", "amount": 1}]
    failed = await _call(bank, ep, "deposit_many", entries=entries)
    assert failed == ("Error: 'deposit_many' failed: No account zz", True)
    assert ep.state == {}


async def test_inputs_are_checked_against_their_schema_before_any_step(bank: Environment) -> None:
    ep = _episode(bank)
    bad = await bank.call_tool(
        ep,
        "deposit_many",
        {
            "entries": [{"account": "a1", "amount": 0}, {"account": 3, "amount": 1, "extra": 1}],
            "kind": "coin",
        },
    )
    assert isinstance(bad, RunToolError) and bad.reason == "input_validation"
    for where in (
        "('entries', 0, 'amount')",
        "('entries', 1, 'account')",
        "('entries', 1, 'extra')",
        "('kind',)",
    ):
        assert where in bad.error
    too_many = await bank.call_tool(ep, "deposit_many", {"entries": [{"account": "a1", "amount": 1}] * 6})
    assert isinstance(too_many, RunToolError) and "at most 5 items" in too_many.error
    assert ep.state is None or ep.state == {}
    schema = bank.toolbox.declared["deposit_many"].spec.input_schema
    entries = schema["properties"]["entries"]
    assert entries["maxItems"] == 5 and entries["items"]["additionalProperties"] is False
    assert entries["items"]["properties"]["amount"] == {"minimum": 0.01, "title": "Amount", "type": "number"}
    assert schema["properties"]["kind"]["default"] == "cash" and "$defs" not in json.dumps(schema)


async def test_find_returns_every_match_of_several_conditions(bank: Environment) -> None:
    ep = _episode(bank)
    assert await _call(bank, ep, "find_accounts", frozen=False) == ('["a1"]', False)
    assert await _call(bank, ep, "find_accounts", frozen=True) == ('["a2"]', False)
    assert await _call(bank, ep, "find_accounts", frozen=True, min_balance=6) == ("[]", False)


async def test_output_shapes_a_read(bank: Environment) -> None:
    ep = _episode(bank)
    assert await _call(bank, ep, "owner_of", account="a2") == ("Bob", False)
    assert await _call(bank, ep, "owner_of", account="q") == ("Error: 'owner_of' failed: No account q", True)
    assert await _call(bank, ep, "owner_legacy", account="a1") == ("Owner: Ann", False)


async def test_generated_ids_are_the_same_on_every_replay(bank: Environment) -> None:
    first, second = _episode(bank), _episode(bank)
    for ep in (first, second):
        assert await _call(bank, ep, "open_account", owner="Cy") == ("a3", False)
        assert await _call(bank, ep, "open_account", owner="Di") == ("a4", False)
    assert first.state == second.state
    assert first.state["items"]["accounts"]["a4"] == {"owner": "Di", "balance": 0, "frozen": False, "log": []}


async def test_expressions_are_sandboxed_and_bounded(bank: Environment) -> None:
    ep = _episode(bank)
    assert await _call(bank, ep, "expensive", times=10) == ("200", False)
    text, error = await _call(bank, ep, "expensive", times=400_000)  # 8 MB of text: over the budget
    assert error and text.endswith("would build more than 1,000,000 characters")
    text, error = await _call(bank, ep, "peek_class")
    assert error and "__class__" in text
    assert ep.state == {}


ERRORS = [
    (
        "{type: state, name: t, input: {a: {}}, steps: [{require: 'b > 1', error: nope}]}",
        "55:62 tools[8].steps[0].require: 'b' is not defined here: neither an input nor a name an earlier "
        "step binds (`as:`). Defined here: a",
    ),
    (
        "{type: state, name: t, steps: [{get: x, output: '{{ value }}'}, {get: y}]}",
        "55:53 tools[8].steps[0].output: this step's `output:` would never be shown: the reply is the last "
        "step's result. Shape the reply with the last step's `output:` or the tool's own `output:`",
    ),
    (
        "{type: state, name: t, steps: [{fetch: x}]}",
        "55:36 tools[8].steps[0]: a step names exactly one of: get, find, set, append, remove, increment, "
        "require, let, for_each, new_id (got {'fetch': 'x'})",
    ),
    (
        "{type: state, name: t, steps: [{let: {x: '{% for i in range(9) %}{% endfor %}'}}]}",
        "55:46 tools[8].steps[0].let.x: '{% for i in range(9) %}{% endfor %}' holds a template block: "
        "values compute with `{{ expression }}` only. Use an expression (`{{ items | "
        "sum(attribute='price') }}`) or a `for_each` step",
    ),
    (
        "{type: state, name: t, op: get, path: 'a/{nope}'}",
        "55:43 tools[8].path: 'nope' is not defined here: neither an input nor a name an earlier step "
        "binds (`as:`). Nothing is defined here yet",
    ),
    (
        "{type: state, name: t, input: {xs: {type: array}}, steps: []}",
        "55:40 tools[8].input.xs: `items` goes with `type: array`, and an array needs it",
    ),
]


@pytest.mark.parametrize(("tool", "expected"), ERRORS)
def test_a_bad_step_is_a_located_spec_error(tool: str, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        bank_env(f"  - {tool}\n")
    assert str(caught.value).splitlines()[0] == f"bank.yaml:{expected}"
