"""The typed records of a run's results file: the header line and one record per episode.

``envbuilder eval`` writes them; ``view``, ``compare``, ``regrade``, the HTML report and the
catalog's leaderboard (``--results``) read them back through these models, so every reader sees
one shape. Each carries a ``version``: a file written before versions existed reads as version 1
(today's shape, which is also what is written now); a newer version than this envbuilder knows is
refused with a hint. Run folders are untrusted input: a line that is not a record gets an error
naming ``file:line`` and the field, never a traceback; unknown extra fields are kept as they are
(so a record written by a newer minor change still reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envbuilder.errors import EnvbuilderError

__all__ = [
    "RECORD_VERSION",
    "EpisodeRecord",
    "RunFields",
    "RunFileError",
    "RunHeader",
    "RunSummary",
    "parse_line",
]

#: The version of the records this envbuilder writes (and the newest it reads).
RECORD_VERSION = 1


class RunFileError(EnvbuilderError):
    """A results or summary file holds a line that is not a record of a run."""

    code = "invalid_run_file"


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    version: int = Field(default=1, ge=1)
    """The record's format (1: the first; files without the field are version 1)."""


class RunFields(BaseModel):
    """A run's identity as stored under ``run`` (see ``RunIdentity``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    env: str
    env_hash: str | None = None
    server: str | None = None
    split: str
    limit: int | None = None
    model: str
    endpoint: str
    sampling: dict[str, Any] = Field(default_factory=dict)
    samples: int = 1
    max_turns: int = 10
    answer: str = "tool"
    endpoints: dict[str, dict[str, str]] = Field(default_factory=dict)
    """The simulated user's and judge's overridden endpoints (absent: none was)."""


class RunHeader(_Record):
    """The first line of a results file: which run the episodes belong to."""

    run: RunFields
    run_id: str
    started: str | None = None
    command: str | None = None
    envbuilder: str | None = None
    """The version of envbuilder that started the run."""
    regraded_from: str | None = None
    """The run this one is a regrade of (``envbuilder regrade``)."""

    def to_dict(self) -> dict[str, Any]:
        """The header as it is stored (fields it was read without stay absent)."""
        return self.model_dump(mode="json", exclude_unset=True)


class EpisodeRecord(_Record):
    """One line per episode (the agent loop's record; the reader keeps it as a dict)."""

    run_id: str | None = None
    split: str
    index: int = Field(ge=0)
    sample: int | None = Field(default=0, ge=0)
    status: str | None = None
    """``finished``, ``max_turns`` or ``error``."""
    reward: float | None = None
    finished: bool | None = None
    turns: int | None = None
    task: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    metadata: Any = None
    messages: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    error: str | None = None
    error_reason: str | None = None


_RecordT = TypeVar("_RecordT", bound=_Record)


class _Estimate(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    mean: float | None = None
    ci95: tuple[float | None, float | None] = (None, None)


class _Outcomes(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    error: int = 0


class SummaryNumbers(BaseModel):
    """The parts of a run's summary (``Summary.to_dict()``) a leaderboard row reads."""

    model_config = ConfigDict(extra="allow", frozen=True)

    episodes: int
    tasks: int
    outcomes: _Outcomes = Field(default_factory=_Outcomes)
    mean_reward_all: _Estimate
    accuracy_graded: _Estimate = Field(default_factory=_Estimate)
    pass_at_k: dict[str, float | None] = Field(default_factory=dict)


class RunSummary(_Record):
    """A run's ``.summary.json`` (what ``envbuilder catalog --results`` reads)."""

    run: RunFields
    run_id: str | None = None
    command: str | None = None
    started: str | None = None
    finished: str | None = None
    results: str | None = None
    """The results file's name, beside the summary."""
    group_by: str | None = None
    summary: SummaryNumbers


def _where(path: Path, line: int, error: ValidationError) -> str:
    first = error.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(the line)"
    value = repr(first.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    return f"{path}:{line}: {key}: {first['msg']} (got {value})"


def parse_line(model: type[_RecordT], data: Any, path: Path, line: int) -> _RecordT:
    """``data`` (one JSON line of ``path``) as ``model``.

    Raises:
        RunFileError: ``data`` is not such a record, or is of a newer version than this
            envbuilder reads; the message names ``path:line`` and the field.
    """
    if not isinstance(data, dict):
        raise RunFileError(f"{path}:{line}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version > RECORD_VERSION:
        raise RunFileError(
            f"{path}:{line}: record version {version} is newer than this envbuilder reads ({RECORD_VERSION})",
            hint="Upgrade envbuilder to read this run",
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        what = {RunHeader: "line is not a valid run header", RunSummary: "file is not a valid run summary"}
        hint = f"The {what.get(model, 'line is not a valid episode record')} of `envbuilder eval`"
        raise RunFileError(_where(path, line, exc), hint=hint) from None
