"""A run's identity and its results file: the header that says which run the episodes belong to.

A run is everything that decides its results: the environment and its content hash, the split
and task selection, the model and its endpoint, the sampling parameters, samples per task, the
turn limit, and the simulated user's and judge's endpoints where a flag or variable replaced the
spec's (``--judge-model``, ``--user-base-url`` …; the spec's own are in its hash). A base URL is
recorded without credentials (user info, query, fragment); an API key never is.

The results file (JSONL) starts with a header line ``{"run": {...}, "run_id":
...}`` and every episode line carries the same ``run_id``. Resuming into a file continues
exactly that run; any other run is refused, naming each field that differs. Both kinds of line
are read back as the typed records of :mod:`envbuilder.eval._records` (with their ``version``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import urllib.parse
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envbuilder._version import __version__
from envbuilder.errors import EnvbuilderError, file_error
from envbuilder.eval._records import RECORD_VERSION, EpisodeRecord, RunFileError, RunHeader, parse_line
from envbuilder.paths import refuse_link, write_file

__all__ = [
    "EpisodeKey",
    "ResultsFile",
    "RunIdentity",
    "RunMismatch",
    "describe",
    "describe_sampling",
    "endpoint_identity",
    "episode_key",
]

#: ``(split, task index, sample)``: one episode of a run.
EpisodeKey = tuple[str, int, int]

# The option that sets each identity field, for messages a user can act on.
_OPTIONS = {
    "env": "the environment",
    "env_hash": "the environment's content hash",
    "server": "the ORS server",
    "split": "--split",
    "limit": "--limit",
    "model": "--model",
    "endpoint": "--base-url",
    "sampling": "the sampling options",
    "samples": "--samples",
    "max_turns": "--max-turns",
    "answer": "--answer",
    "endpoints": "the simulated user's and judge's endpoints",
}
#: The override of each endpoint field (a flag, or its variable ``$ENVBUILDER_JUDGE_MODEL`` …).
_ENDPOINT_FIELDS = ("base_url", "model")
_SAMPLING = {
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "extra": "--extra-body",
}


def describe_sampling(sampling: dict[str, Any] | None) -> str:
    """Sampling options as the command line gives them: ``--temperature 0.5 --seed 1``, or
    ``the endpoint's defaults`` when none was set."""
    parts = []
    for key, option in _SAMPLING.items():
        value = (sampling or {}).get(key)
        if value in (None, {}):
            continue
        parts.append(f"{option} {json.dumps(value, sort_keys=True) if key == 'extra' else value}")
    return " ".join(parts) or "the endpoint's defaults"


def _public_url(url: str) -> str:
    """``url`` without what may be a secret: user info, query and fragment."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def endpoint_identity(uses: Iterable[Any]) -> dict[str, dict[str, str]]:
    """The part of a run's identity that the environment's model endpoints make
    (:class:`envbuilder.llm.EndpointUse`): per role (``judge``, ``user``), the base URL and model
    that replaced the spec's. Empty when none did. Never a key."""
    out: dict[str, dict[str, str]] = {}
    for use in uses:
        for name in _ENDPOINT_FIELDS:
            if name in use.overridden:
                value = getattr(use, name)
                out.setdefault(use.role, {})[name] = _public_url(value) if name == "base_url" else value
    return out


def _option(role: str, name: str) -> str:
    flag = f"--{role}-{name.replace('_', '-')}"
    return f"{flag} (or $ENVBUILDER_{role.upper()}_{name.upper()})"


def describe(key: str, value: Any) -> str:
    """An identity field's value as a reader wants it (sampling as options, None as ``none``)."""
    if key == "sampling":
        return describe_sampling(value)
    return "none" if value is None else str(value)


class RunMismatch(EnvbuilderError):
    """A results file belongs to another run than the one asked for."""

    code = "run_mismatch"


@dataclass(frozen=True)
class RunIdentity:
    """Everything that decides a run's results (see the module docstring)."""

    env: str
    env_hash: str | None
    """``sha256:…`` over the spec and its files; None when the server does not say."""
    server: str | None
    """The ORS server's URL, or None for a spec run in-process."""
    split: str
    limit: int | None
    """The first ``limit`` tasks of the split (None: all)."""
    model: str
    endpoint: str
    sampling: dict[str, Any] = field(default_factory=dict)
    samples: int = 1
    max_turns: int = 10
    answer: str = "tool"
    """How the model answers: ``tool`` (it calls the answer tool) or ``text`` (its final message)."""
    endpoints: dict[str, dict[str, str]] = field(default_factory=dict)
    """The simulated user's and judge's overridden endpoints (:func:`endpoint_identity`)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.endpoints:  # absent, as before the field: such a run keeps its run_id
            del out["endpoints"]
        return out

    @property
    def run_id(self) -> str:
        """A short hash of the identity: equal identities, equal ids."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunIdentity:
        # a field an older header lacks takes its default (the behaviour of that version)
        return cls(**{k: data[k] for k in _OPTIONS if k in data})

    def differences(self, other: RunIdentity) -> list[str]:
        """One line per field that differs: ``--model: "a" in the file, "b" now``."""
        mine, theirs = asdict(self), asdict(other)
        out = []
        for k in _OPTIONS:
            if mine[k] == theirs[k]:
                continue
            if k == "endpoints":
                a, b = mine[k] or {}, theirs[k] or {}
                out += [
                    f"{_option(role, name)}: {json.dumps(a.get(role, {}).get(name))} in the file, "
                    f"{json.dumps(b.get(role, {}).get(name))} now"
                    for role in sorted(a.keys() | b.keys())
                    for name in _ENDPOINT_FIELDS
                    if a.get(role, {}).get(name) != b.get(role, {}).get(name)
                ]
            elif k == "sampling":
                a, b = mine[k] or {}, theirs[k] or {}
                out += [
                    f"{_SAMPLING[s]}: {json.dumps(a.get(s))} in the file, {json.dumps(b.get(s))} now"
                    for s in _SAMPLING
                    if a.get(s) != b.get(s)
                ]
            else:
                out.append(f"{_OPTIONS[k]}: {json.dumps(mine[k])} in the file, {json.dumps(theirs[k])} now")
        return out


#: The bulky parts of a record: needed to read an episode, not to resume or score a run.
TRANSCRIPT = ("messages", "tool_calls")


def without_transcript(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in TRANSCRIPT}


def episode_key(record: dict[str, Any]) -> EpisodeKey:
    return (str(record["split"]), int(record["index"]), int(record.get("sample") or 0))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class ResultsFile:
    """A run's JSONL file: a header line, then one line per episode, appended as they finish."""

    def __init__(self, path: Path):
        self.path = path

    def read(self, *, light: bool = False) -> tuple[RunHeader | None, dict[EpisodeKey, dict[str, Any]]]:
        """The header (None for a missing or empty file) and the latest record of each episode
        (each checked against :class:`EpisodeRecord`); ``light``: without the transcripts (what
        resuming and scoring need, in little memory).

        A torn last line (a run killed mid-write: no newline at its end) is skipped.

        Raises:
            RunMismatch: the file has no run header (it is not a results file of this version).
            RunFileError: a line is not a record (not JSON, or a field of the wrong type), named
                as ``file:line``.
        """
        if not self.path.exists():
            return None, {}
        header: RunHeader | None = None
        records: dict[EpisodeKey, dict[str, Any]] = {}
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except ValueError:
                    if not line.endswith("\n"):
                        continue  # the torn last line of a killed run
                    raise RunFileError(f"{self.path}:{n}: not a JSON line") from None
                if n == 1:
                    if not isinstance(data, dict) or "run" not in data:
                        raise RunMismatch(
                            f"{self.path}:1 has no run header",
                            hint="It was not written by this version of `envbuilder eval`; use another --out",
                        )
                    header = parse_line(RunHeader, data, self.path, n)
                    continue
                parse_line(EpisodeRecord, data, self.path, n)
                records[episode_key(data)] = without_transcript(data) if light else data
        return header, records

    def header(self) -> RunHeader:
        """The run header (the first line), without reading the episodes.

        Raises:
            EnvbuilderError: the file holds no run (its first line has no ``run``).
            RunFileError: it has one that is not a valid header (named as ``file:1``).
        """
        try:
            with self.path.open(encoding="utf-8", errors="replace") as f:
                header = json.loads(f.readline())
        except (OSError, ValueError):
            header = None
        if not isinstance(header, dict) or "run" not in header:
            raise EnvbuilderError(f"{self.path} holds no run", hint="Run `envbuilder eval … --out` first")
        return parse_line(RunHeader, header, self.path, 1)

    def open_for(self, identity: RunIdentity, command: str | None = None) -> dict[EpisodeKey, dict[str, Any]]:
        """Check that the file belongs to ``identity`` (or start it); its records so far.

        Raises:
            RunMismatch: the file belongs to another run; the message names every difference.
            EnvbuilderError: ``file_error``: the file cannot be read, made or written (its
                folder is a file, a read-only disk …), naming it and the system's reason.
        """
        try:
            return self._open_for(identity, command)
        except OSError as exc:
            raise file_error(exc, "open the results file") from None

    def _open_for(self, identity: RunIdentity, command: str | None) -> dict[EpisodeKey, dict[str, Any]]:
        refuse_link(self.path)  # appended to and cut below: never through a link
        header, records = self.read(light=True)
        if header is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            head = {
                "version": RECORD_VERSION,
                "run": identity.to_dict(),
                "run_id": identity.run_id,
                "started": _now(),
                "command": command,
                "envbuilder": __version__,
            }
            write_file(self.path, json.dumps(head, ensure_ascii=False) + "\n")
            return {}
        theirs = RunIdentity.from_dict(header.run.model_dump())
        if theirs != identity:
            lines = "\n".join(f"  {d}" for d in theirs.differences(identity))
            raise RunMismatch(
                f"{self.path} belongs to another run ({header.run_id}); it differs in:\n{lines}\n"
                "Resume with the same options, or write this run to another --out"
            )
        self._drop_torn_tail()
        return records

    def _drop_torn_tail(self) -> None:
        """Cut a last line without its newline (a run killed mid-write): appending after it
        would glue the next record onto the fragment and lose it."""
        with self.path.open("rb+") as f:
            size = f.seek(0, 2)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            keep = size - 1
            while keep > 0:
                f.seek(keep - 1)
                if f.read(1) == b"\n":
                    break
                keep = max(0, keep - 1)
            f.truncate(keep)

    def load(self) -> tuple[RunHeader, list[dict[str, Any]]]:
        """The header and the episode records (in file order of their latest version).

        Raises:
            EnvbuilderError: the file does not exist or holds no run.
        """
        if not self.path.is_file():
            raise EnvbuilderError(f"{self.path}: no such results file", code="not_found")
        header, records = self.read()
        if header is None:
            raise EnvbuilderError(f"{self.path} holds no run", hint="Run `envbuilder eval … --out` first")
        return header, sorted(records.values(), key=episode_key)

    def recorded_group_by(self) -> str | None:
        """The ``--group-by`` the run was summarised with (from its summary file), if any."""
        try:
            data = json.loads(self.summary_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        value = data.get("group_by") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None

    @property
    def summary_path(self) -> Path:
        """``results.jsonl`` → ``results.summary.json`` beside it."""
        return self.path.with_name(self.path.stem + ".summary.json")

    def write_summary(self, header: RunHeader, summary: dict[str, Any], group_by: str | None) -> Path:
        """Write the run's summary (what ``envbuilder catalog --results`` reads); returns its path."""
        data = {
            "version": RECORD_VERSION,
            "run": header.to_dict()["run"],
            "run_id": header.run_id,
            "command": header.command,
            "started": header.started,
            "finished": _now(),
            "results": self.path.name,
            "group_by": group_by,
            "summary": summary,
        }
        return write_file(self.summary_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
