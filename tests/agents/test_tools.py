"""Stateful tools: the declarative `state` kind and Python `function`s over the episode's state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from envbuilder.environment import Environment, Episode
from envbuilder.errors import SpecError
from envbuilder.protocol import RunToolError, RunToolSuccess
from envbuilder.spec import parse_spec
from tests.agents.conftest import DATA, bank_env


async def _call(env: Environment, episode: Episode, name: str, **args: Any) -> tuple[str, bool]:
    result = await env.call_tool(episode, name, args)
    assert isinstance(result, RunToolSuccess), result
    text = result.output.blocks[0].text  # type: ignore[union-attr]
    return text, bool(result.output.metadata and result.output.metadata.get("error"))


def _episode(env: Environment, index: int = 0) -> Episode:
    return Episode(task=env.split("test").task(index))


async def test_declarative_reads_and_updates_with_preconditions(bank: Environment) -> None:
    ep = _episode(bank)
    assert await _call(bank, ep, "find_account", owner="Bob") == ("a2", False)
    assert await _call(bank, ep, "find_account", owner="Cy") == (
        "Error: 'find_account' failed: No account for Cy",
        True,
    )
    text, error = await _call(bank, ep, "get_account", account="a1")
    assert json.loads(text) == {"owner": "Ann", "balance": 100, "frozen": False, "log": []} and not error
    assert (await _call(bank, ep, "get_account", account="zz"))[0].endswith("No account zz")
    assert await _call(bank, ep, "unfreeze", account="a2") == ("Account a2 unfrozen.", False)
    again = await _call(bank, ep, "unfreeze", account="a2")
    assert again == ("Error: 'unfreeze' failed: Account a2 is not frozen", True)
    assert (await _call(bank, ep, "unfreeze", account="q"))[0].endswith("No account q")
    await _call(bank, ep, "note", account="a1", text="hello")
    closing = await _call(bank, ep, "close", account="a1")
    assert closing == ("Error: 'close' failed: Only an empty account can be closed", True)
    assert ep.state == {
        "items": {
            "accounts": {
                "a2": {"owner": "Bob", "balance": 5, "frozen": False, "log": []},
                "a1": {"owner": "Ann", "balance": 100, "frozen": False, "log": ["note: hello"]},
            }
        }
    }


async def test_a_function_changes_the_state_and_a_failure_changes_nothing(bank: Environment) -> None:
    ep = _episode(bank)
    refused = await _call(bank, ep, "transfer", source="a1", target="a2", amount=10)
    assert refused == ("Error: 'transfer' failed: A frozen account cannot move money", True)
    assert ep.state == {}
    await _call(bank, ep, "unfreeze", account="a2")
    before = json.loads(json.dumps(ep.state))
    # The function changes both accounts and then raises: none of it may stay.
    broke = await _call(bank, ep, "transfer", source="a2", target="a1", amount=50)
    assert broke == ("Error: 'transfer' failed: Insufficient funds", True)
    assert ep.state == before
    assert (await _call(bank, ep, "transfer", source="a1", target="a2", amount=-1))[0].endswith(
        "The amount must be positive"
    )
    done = await _call(bank, ep, "transfer", source="a1", target="a2", amount=30, memo="rent")
    assert json.loads(done[0]) == {"source": 70, "target": 35}
    assert ep.state["items"]["accounts"]["a1"]["log"] == ["-30.0 rent"]
    assert await _call(bank, ep, "total") == ("105.0", False)
    assert bank.document is not None and bank.document.data["accounts"]["a1"]["balance"] == 100


async def test_the_task_patch_is_the_initial_state(bank: Environment) -> None:
    ep = _episode(bank, 1)
    text, _ = await _call(bank, ep, "get_account", account="a1")
    assert json.loads(text)["frozen"] is True


async def test_the_schema_comes_from_type_hints_and_the_docstring(bank: Environment) -> None:
    specs = {t.name: t for t in bank.tools_listing.tools}
    transfer = specs["transfer"]
    assert transfer.description == "Move money between two accounts."
    schema = transfer.input_schema
    assert schema["required"] == ["source", "target", "amount"]
    assert schema["properties"]["amount"] == {
        "description": "How much to move; more than zero.",
        "title": "Amount",
        "type": "number",
    }
    assert schema["properties"]["memo"]["default"] == ""
    assert schema["additionalProperties"] is False
    tags = specs["echo_tags"].input_schema
    assert tags["properties"]["labels"]["type"] == "array"
    assert tags["properties"]["labels"]["description"] == "Some labels, described over two lines."
    ep = _episode(bank)
    bad = await bank.call_tool(ep, "transfer", {"source": "a1", "target": "a2", "amount": "lots"})
    assert isinstance(bad, RunToolError) and bad.reason == "input_validation"
    assert await _call(bank, ep, "echo_tags", labels=["x", "y"], limit=1) == ('["x"]', False)


def test_a_spec_with_a_broken_function_module_names_every_problem() -> None:
    with pytest.raises(SpecError) as info:
        bank_env(
            extra="  - {type: function, module: bank.py, name: trnsfer}\n"
            "  - {type: function, module: ../conftest.py, name: x}\n"
            "  - {type: function, module: nowhere.py, name: y}\n",
        )
    text = str(info.value)
    assert "has no function 'trnsfer'" in text and "Did you mean 'transfer'?" in text
    assert "outside the spec's folder" in text
    assert "no file 'nowhere.py' beside the spec" in text
    assert "tools[8].name" in text and "tools[9].module" in text


def test_a_stateful_tool_without_state_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="declares no `state:`"):
        bank_env(replace=("state: {file: bank.json, field: initial_state}\n", ""))


def test_state_match_without_state_and_a_user_with_attempts_are_spec_errors() -> None:
    with pytest.raises(SpecError) as info:
        bank_env(
            extra="user: {base_url: 'http://127.0.0.1:9/v1', model: m, template: 'You are Bob.'}\n",
            replace=("submit: {name: send_message, answer_field: message}", "submit: {max_attempts: 2}"),
        )
    assert "`max_attempts` must be 1" in str(info.value)
    text = (DATA / "bank.yaml").read_text()
    text = text.replace("state: {file: bank.json, field: initial_state}\n", "")
    text = text.split("tools:\n")[0]
    with pytest.raises(SpecError, match="grader: the grader compares the episode's state"):
        Environment(parse_spec(text, file="bank.yaml", base_dir=DATA))


def test_a_list_index_from_a_call_is_read_only_when_it_is_a_plausible_number() -> None:
    """A path step into a list reads the key as an index; a key from a call's input that int()
    cannot read (a superscript digit, 5,000 digits, two minus signs) finds nothing, rather than
    failing the call with a ValueError."""
    from envbuilder.tools._state import _MISSING, resolve

    root = {"log": ["a", "b", "c"]}
    assert resolve(root, ["log", "1"]) == "b" and resolve(root, ["log", "-1"]) == "c"
    for key in ("²", "9" * 5000, "--1", "3", "-4", "١"):
        assert resolve(root, ["log", key]) is _MISSING, key
