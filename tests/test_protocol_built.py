"""Outputs built without validation (``protocol.text_output``, ``protocol.call_result``) equal the
validated models and serialise to the same bytes; other value types go through validation."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from pydantic import ValidationError

from envbuilder.protocol import RunToolSuccess, TextBlock, ToolOutput, call_result, text_output


@pytest.mark.parametrize(
    ("metadata", "reward", "finished"),
    [
        ({"outcome": "correct", "score": 1.0, "nested": {"a": [1, 2.5, None]}}, 1.0, True),
        (None, None, False),
        ({}, -0.25, False),
        ({"x": 1}, 1, True),  # an int reward: validated, so 1.0 as ever
        ({"x": 1}, 0.0, 1),  # an int for a bool: validated
    ],
)
def test_built_outputs_are_the_validated_ones(metadata: Any, reward: Any, finished: Any) -> None:
    blocks: list[Any] = [TextBlock(text="Correct!")]
    slow = RunToolSuccess(
        output=ToolOutput(blocks=blocks, metadata=metadata, reward=reward, finished=finished)
    )
    fast = call_result(text_output("Correct!", metadata, reward, finished))
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.__getstate__() == slow.__getstate__()
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.output.model_fields_set == slow.output.model_fields_set
    assert fast.output.blocks[0].model_fields_set == slow.output.blocks[0].model_fields_set
    assert pickle.loads(pickle.dumps(fast)) == slow and copy.deepcopy(fast) == slow


def test_what_validation_refuses_is_still_refused() -> None:
    with pytest.raises(ValidationError):
        text_output("x", {1: "not a string key"}, 1.0, True)  # type: ignore[dict-item]
