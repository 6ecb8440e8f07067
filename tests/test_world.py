"""The state document: sessions keep only their changes, and the shared document never changes."""

from __future__ import annotations

import json

import pytest

from envbuilder.errors import ToolError
from envbuilder.world import MISSING, Document, changed_paths

BASE = {
    "users": {"u1": {"name": "Ann", "tags": ["a"]}, "u2": {"name": "Bob", "tags": []}},
    "version": 3,
    "log": ["start"],
}


def _doc() -> Document:
    return Document(json.loads(json.dumps(BASE)), patch_field="initial_state")


def test_a_change_is_kept_as_the_changed_item_only_and_the_document_is_untouched() -> None:
    doc = _doc()
    state = doc.state({})
    state["users"]["u1"]["tags"].append("b")
    state["log"].append("edit")
    changes = state.commit()
    assert changes == {
        "items": {"users": {"u1": {"name": "Ann", "tags": ["a", "b"]}}},
        "values": {"log": ["start", "edit"]},
    }
    assert doc.data == BASE
    again = doc.state(json.loads(json.dumps(changes)))  # through a store: plain JSON
    assert again["users"]["u1"]["tags"] == ["a", "b"] and again["users"]["u2"]["name"] == "Bob"
    assert again["log"] == ["start", "edit"]


def test_reading_changes_nothing_and_a_change_undone_is_dropped() -> None:
    doc = _doc()
    state = doc.state({})
    assert sorted(state["users"]) == ["u1", "u2"] and len(state["users"]) == 2
    _ = [u["name"] for u in state["users"].values()]
    state["users"]["u2"]["name"] = "Bob"  # the same value: no change
    assert state.commit() == {}
    state = doc.state({"items": {"users": {"u1": {"name": "Zed", "tags": ["a"]}}}})
    state["users"]["u1"]["name"] = "Ann"
    assert state.commit() == {}


def test_adding_and_deleting_items_and_top_level_keys() -> None:
    doc = _doc()
    state = doc.state({})
    state["users"]["u3"] = {"name": "Cy", "tags": []}
    del state["users"]["u1"]
    del state["version"]
    state["new"] = {"k": 1}
    changes = state.commit()
    assert changes == {
        "items": {"users": {"u3": {"name": "Cy", "tags": []}}},
        "deleted": {"users": ["u1"]},
        "values": {"version": {"$removed": True}, "new": {"k": 1}},
    }
    after = doc.state(changes)
    assert sorted(after["users"]) == ["u2", "u3"] and "u1" not in after["users"]
    assert "version" not in after and after["new"] == {"k": 1}
    with pytest.raises(KeyError):
        after["version"]
    assert sorted(after) == ["log", "new", "users"]


def test_a_task_patch_is_merged_into_the_document() -> None:
    doc = _doc()
    changes = doc.initial(
        {"initial_state": json.dumps({"users": {"u1": {"name": "Ana"}, "u2": None}, "version": 4})}
    )
    state = doc.state(changes)
    assert state["users"]["u1"] == {"name": "Ana", "tags": ["a"]}
    assert "u2" not in state["users"] and state["version"] == 4
    assert doc.initial({"initial_state": None}) == {} and doc.initial({}) == {}
    with pytest.raises(ToolError, match="not JSON"):
        doc.initial({"initial_state": "{nope"})
    with pytest.raises(ToolError, match="merge patch"):
        doc.initial({"initial_state": [1]})


def test_changed_paths_compares_two_sessions_from_the_same_document() -> None:
    doc = _doc()
    one = doc.state({})
    one["users"]["u1"]["name"] = "X"
    two = doc.state({})
    two["users"]["u2"]["name"] = "Y"
    del two["version"]
    paths = changed_paths(doc, one.commit(), two.commit())
    assert paths[("users", "u1")] == [{"name": "X", "tags": ["a"]}, {"name": "Ann", "tags": ["a"]}]
    assert paths[("users", "u2")][0]["name"] == "Bob" and paths[("users", "u2")][1]["name"] == "Y"
    assert paths[("version",)] == [3, MISSING]


def test_the_retail_database_session_stays_small() -> None:
    from tests.conftest import ENVS

    doc = Document(json.loads((ENVS / "data/tau2_retail/db.json").read_text()))
    state = doc.state({})
    order_id = next(iter(state["orders"]))
    state["orders"][order_id]["status"] = "cancelled"
    found = [k for k in state["users"] if state["users"].peek(k)["address"]["zip"] == "19122"]
    assert found
    changes = state.commit()
    assert list(changes["items"]["orders"]) == [order_id] and "users" not in changes.get("items", {})
    assert len(json.dumps(changes)) < 2_000
