"""Which split a caller that names none plays: the one rule for eval, profile, the trainers'
adapters and the OpenEnv door.

A spec's splits say what they are for (``type: train | validation | test``; ``test`` when not
written). Evaluating picks a split held out for testing, training picks one meant for training:
so ``envbuilder eval`` of a spec whose splits are ``train`` and ``validation`` never reports
training-set numbers, and a trainer never trains on the test split unless told to.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["evaluation_split", "training_split"]

_HELD_OUT = {"test": 0, "validation": 1}


def evaluation_split(splits: Iterable[tuple[str, str]]) -> str | None:
    """The split to evaluate on among ``splits`` (``(name, type)`` in the spec's order): one of
    type ``test``, else ``validation``, else the first; among equals, the one named ``test``,
    then any not named ``train`` (a type left out reads ``test``, so a ``train`` split written
    without one is not taken for a test split while another is there), then the first. None
    when there are no splits."""
    ranked = [
        (_HELD_OUT.get(kind, 2), name != "test", name == "train", i, name)
        for i, (name, kind) in enumerate(splits)
    ]
    return min(ranked)[-1] if ranked else None


def training_split(splits: Iterable[tuple[str, str]]) -> str | None:
    """The split to train on among ``splits`` (``(name, type)`` in the spec's order): the first
    of type ``train`` (the one named ``train`` among several), else one named ``train`` (its
    type left out); None when there is neither: training on a held-out split must be asked for
    by name."""
    ranked = [
        (kind != "train", name != "train", i, name)
        for i, (name, kind) in enumerate(splits)
        if kind == "train" or name == "train"
    ]
    return min(ranked)[-1] if ranked else None
