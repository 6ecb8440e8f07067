"""What of a task a run's records keep for grouping: short scalar fields, those of its objects
by dotted name, bounded."""

from __future__ import annotations

from envbuilder.eval._runner import task_fields


def test_short_scalars_are_kept_long_text_and_lists_are_not() -> None:
    task = {
        "id": 3,
        "level": "hard",
        "ok": True,
        "score": 0.5,
        "text": "x" * 201,
        "tags": ["a"],
        "none": None,
    }
    assert task_fields(task) == {"id": 3, "level": "hard", "ok": True, "score": 0.5}


def test_an_object_s_fields_are_kept_by_dotted_name_three_deep() -> None:
    task = {"meta": {"source": "web", "long": "y" * 500, "a": {"b": {"c": 1, "d": {"e": 2}}}}, "id": 1}
    assert task_fields(task) == {"id": 1, "meta.source": "web", "meta.a.b.c": 1}


def test_a_field_whose_own_name_has_a_dot_keeps_its_value() -> None:
    assert task_fields({"meta.x": "own", "meta": {"x": "nested"}}) == {"meta.x": "own"}


def test_at_most_32_nested_fields_are_kept() -> None:
    task = {"files": {f"f{i}": "short" for i in range(1000)}, "id": 7}
    fields = task_fields(task)
    assert fields["id"] == 7 and len(fields) == 33
    assert [k for k in fields if k != "id"] == [f"files.f{i}" for i in range(32)]
