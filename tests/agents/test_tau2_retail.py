"""envs/tau2_retail.yaml: every task's gold actions score 1.0, and a variation of each scores 0.

A variation is the gold trajectory with one thing wrong. Where the gold changes the database,
two variations: the last change left out, and one argument of it wrong. A task whose gold
changes nothing (no write, or only writes the shop refuses, as two gold trajectories hold) is
judged on what else its reward needs: the transfer to a human left out, or the figures the
customer must hear left unsaid; the tasks that need none of these (the customer must simply
not be helped) get an unwanted change instead (a pending order cancelled).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from envbuilder.authoring import Case, gold_cases, run_cases
from envbuilder.environment import Environment, load_environment
from tests.conftest import ENVS

WRITES = {
    "cancel_pending_order",
    "modify_pending_order_address",
    "modify_pending_order_payment",
    "modify_pending_order_items",
    "modify_user_address",
    "return_delivered_order_items",
    "exchange_delivered_order_items",
}
NOTHING_SAID = "Is there anything else I can help you with?"


@pytest.fixture(scope="module")
def retail() -> Environment:
    return load_environment(ENVS / "tau2_retail.yaml")


def _wrong(call: dict[str, Any]) -> dict[str, Any]:
    """``call`` with one argument wrong: the one a careless agent would most likely get wrong."""
    args = dict(call["arguments"])
    for key in ("reason", "payment_method_id", "new_item_ids", "item_ids", "address1", "user_id"):
        if key not in args:
            continue
        value = args[key]
        if key == "reason":
            args[key] = "ordered by mistake" if value == "no longer needed" else "no longer needed"
        elif isinstance(value, list):
            args[key] = value[:-1] if len(value) > 1 else ["1000000000"]
        else:
            args[key] = f"{value}1"
        return {"name": call["name"], "arguments": args}
    raise AssertionError(f"no argument to get wrong in {call}")


async def _effective_writes(env: Environment, task: dict[str, Any], calls: list[dict[str, Any]]) -> list[int]:
    """The write calls of ``calls`` that the shop carries out (replayed in order)."""
    out = []
    for i, call in enumerate(calls):
        if call["name"] in WRITES:
            _, before = await env.toolbox.replay(task, calls[:i])
            _, after = await env.toolbox.replay(task, calls[: i + 1])
            if len(after) == len(before):
                out.append(i)
    return out


def _variations(env: Environment, case: Case) -> Iterator[Case]:
    task = env.split(case.split).task(case.index)
    calls = case.calls or []
    writes = asyncio.run(_effective_writes(env, task, calls))
    names = [c["name"] for c in calls]
    if writes:
        last = writes[-1]
        yield _case(case, "missing", [c for i, c in enumerate(calls) if i != last], case.response)
        wrong = [(_wrong(c) if i == last else c) for i, c in enumerate(calls)]
        yield _case(case, "wrong argument", wrong, case.response)
    elif "transfer_to_human_agents" in names:
        kept = [c for c in calls if c["name"] != "transfer_to_human_agents"]
        yield _case(case, "missing", kept, case.response)
    elif list(task["communicate_info"]):
        yield _case(case, "not said", calls, NOTHING_SAID)
    else:
        assert env.document is not None
        pending = next(k for k, o in env.document.data["orders"].items() if o["status"] == "pending")
        extra = {
            "name": "cancel_pending_order",
            "arguments": {"order_id": pending, "reason": "no longer needed"},
        }
        yield _case(case, "unwanted change", [*calls, extra], case.response)


def _case(gold: Case, kind: str, calls: list[dict[str, Any]], response: str | None) -> Case:
    return Case("variation", f"{gold.label} {kind}", gold.split, gold.index, response, 0.0, calls=calls)


def test_every_gold_trajectory_scores_one(retail: Environment) -> None:
    cases = gold_cases(retail, sample=1000)
    assert len(cases) == 114 and all(c.calls is not None for c in cases)
    results = run_cases(retail, cases)
    assert [(r.case.label, r.reason) for r in results if not r.passed] == []
    assert {r.reward for r in results} == {1.0}


def test_every_variation_scores_zero(retail: Environment) -> None:
    variations = [v for case in gold_cases(retail, sample=1000) for v in _variations(retail, case)]
    kinds = [v.label.split(" ", 1)[1] for v in variations]
    assert len({v.label.split(" ", 1)[0] for v in variations}) == 114  # every task varied
    # 103 tasks change the database; 3 more need a transfer; 4 need figures said; 4 need nothing.
    assert (kinds.count("wrong argument"), kinds.count("missing")) == (103, 103 + 3)
    assert (kinds.count("not said"), kinds.count("unwanted change")) == (4, 4)
    results = run_cases(retail, variations)
    assert [(r.case.label, r.reward, r.reason) for r in results if not r.passed] == []


def test_the_gold_and_the_customer_stay_hidden(retail: Environment) -> None:
    task = retail.split("test").task(0)
    shown = retail.public(task)
    assert set(shown) == {"id"}
    prompt = json.dumps([m.model_dump(mode="json") for m in retail.messages(task)])
    assert task["reason_for_call"] not in prompt and task["actions"] not in prompt
    assert "Retail agent policy" in prompt


def test_the_check_command_replays_every_task() -> None:
    from typer.testing import CliRunner

    from envbuilder.cli import app

    result = CliRunner().invoke(app, ["check", str(ENVS / "tau2_retail.yaml"), "--sample", "100"])
    assert result.exit_code == 0, result.output
    assert "gold answers: 114/114 get full reward" in result.output
