"""The one rule for the split a caller that names none plays: evaluation takes a held-out split,
training a train split, never the other way round."""

from __future__ import annotations

import pytest

from envbuilder.spec import evaluation_split, training_split

T, V, X = "train", "validation", "test"


@pytest.mark.parametrize(
    ("splits", "evaluated", "trained"),
    [
        ([("train", T), ("test", X)], "test", "train"),
        ([("test", X), ("train", T)], "test", "train"),
        # an HF dataset without a test split: its validation split is the held-out one
        ([("train", T), ("validation", X)], "validation", "train"),
        ([("train", T), ("dev", V)], "dev", "train"),
        ([("fit", T), ("dev", V), ("held", X)], "held", "fit"),
        # types left out read `test`: a split named train is still not the one evaluated
        ([("train", X), ("validation", X)], "validation", "train"),
        ([("train", X), ("test", X)], "test", "train"),
        # several test splits: the one named test, else the first
        ([("hard", X), ("test", X)], "test", None),
        ([("hard", X), ("easy", X)], "hard", None),
        # a declared type is what the split is for, whatever its name
        ([("test", T), ("other", X)], "other", "test"),
        # several train splits: the one named train, else the first
        ([("fit", T), ("train", T), ("test", X)], "test", "train"),
        ([("fit", T), ("more", T)], "fit", "fit"),
        # one split: evaluation has nothing else; training only when it is a train split
        ([("only", T)], "only", "only"),
        ([("only", X)], "only", None),
        ([("dev", V)], "dev", None),
        ([], None, None),
    ],
)
def test_the_split_played_when_none_is_named(
    splits: list[tuple[str, str]], evaluated: str | None, trained: str | None
) -> None:
    assert evaluation_split(splits) == evaluated
    assert training_split(splits) == trained
    assert evaluation_split(iter(splits)) == evaluated  # any iterable, read once
    assert training_split(iter(splits)) == trained
