"""In-process episodes for trainers: a spec's environment driven without HTTP.

Trainers call environments from synchronous code (TRL's tool methods, SkyRL's ``step``, verl's
``compute_score``) and from their own event loops (verl's async tools, verifiers). The episode is
the one in-process driver, :class:`envbuilder.inprocess.LocalEpisode`; synchronous calls run as
:func:`envbuilder.threadloop.run_sync` says (this thread's own loop, or the shared loop thread
when this thread is inside a running loop, so no loop is ever nested).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from envbuilder.environment import Environment, load_environment
from envbuilder.episode import Reply
from envbuilder.errors import TaskNotFound
from envbuilder.inprocess import LocalEpisode, text_of
from envbuilder.protocol import RunToolError, TextBlock, ToolOutput

__all__ = ["LocalEpisode", "describe", "environment", "train_split"]


@lru_cache(maxsize=64)
def _load(path: str) -> Environment:
    return load_environment(path)


@lru_cache(maxsize=256)
def _named(spec: str) -> Environment:
    """The environment a path names as given (a dataset row's column), by its resolved path."""
    return _load(str(Path(spec).resolve()))


def environment(spec: str | Path | Environment) -> Environment:
    """A compiled environment from a spec path (loaded once per process) or as given."""
    if type(spec) is str:  # (a dataset row's column: the common case, one cache look-up)
        return _named(spec)
    return spec if isinstance(spec, Environment) else _named(str(spec))


def describe(out: Reply | ToolOutput | RunToolError) -> str:
    """What the agent reads back from a call: its text, or the error."""
    if isinstance(out, Reply):  # (a graded answer: LocalEpisode.step)
        return out.text or "(no output)"
    if type(out) is ToolOutput:
        blocks = out.blocks  # (most outputs: one text, read without text_of's call)
        text = blocks[0].text if len(blocks) == 1 and type(blocks[0]) is TextBlock else text_of(blocks)
        return text or "(no output)"
    assert isinstance(out, RunToolError)
    return f"Error: {out.error}"


def train_split(env: Environment, split: object = None) -> str:
    """``split`` when given (as text: a dataset row's column), else the split ``env`` declares
    for training (:meth:`Environment.training_split`).

    Raises:
        TaskNotFound: none is given and ``env`` has no train split (a trainer never trains on
            a held-out split unless it is named).
    """
    if split is not None:
        return str(split)
    chosen = env.training_split()
    if chosen is None:
        splits = ", ".join(f"{v.name} ({v.type})" for v in env.splits.values()) or "none"
        raise TaskNotFound(
            f"{env.name} has no train split to train on (its splits: {splits})",
            hint="Name the split to train on one of them anyway (split=...), or add a split of type: train",
            code="invalid_split",
        )
    return chosen
