"""Other harnesses' task files as datasets: NeMo Gym task JSONL and verifiers taskset rows.

Both are JSON Lines with one task per line; each line is converted into a flat row with a
``messages`` column (the conversation the task opens with, as ``{role, content}`` turns that
``prompt: {conversation: {column: messages}}`` renders) and ``prompt`` (the text of its last
user turn), beside the line's own fields. Then the rows are cached like any JSONL (`_files`).

- **NeMo Gym** (``type: nemo_gym``): a line holds ``responses_create_params``, the OpenAI
  Responses API request the task starts (``instructions``: the system prompt; ``input``: a
  string or a list of message items whose ``content`` is text or ``input_text`` parts;
  ``tools``: function tools), and the resources server's verifier fields beside it (such as
  ``expected_answer``), which become columns. The tools are kept as JSON text in ``tools``.
- **verifiers** (``type: verifiers``): a row of a verifiers dataset: ``prompt`` (a list of
  chat messages, or a string) or ``question``, with ``answer``, ``info`` (an object, kept as
  JSON text) and ``task``. The rows are read from JSON Lines (``Dataset.to_json``), Parquet
  (``Dataset.to_parquet``), or the folder ``Dataset.save_to_disk`` writes (``state.json`` and
  its Arrow shards); for a folder ``DatasetDict.save_to_disk`` wrote, name one split's folder
  (``taskset/test``), or the whole folder for the source split of the same name. The Arrow
  shards are read with pyarrow (the ``datasets`` library is not imported), in the order
  ``state.json`` lists them.

Other item types in a NeMo Gym ``input`` (earlier tool calls) cannot be read as a prompt here
and are refused, naming the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from envbuilder.data._base import Table
from envbuilder.data._files import _FilesConfig, _FileSource, json_lines, stream_objects, table_of_any
from envbuilder.data._parquet import PathOrPaths, resolve_paths
from envbuilder.data._remote import is_url
from envbuilder.errors import DataError

__all__ = ["NemoGymConfig", "NemoGymSource", "VerifiersConfig", "VerifiersSource"]

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


class NemoGymConfig(_FilesConfig):
    """NeMo Gym task JSONL files (lines with `responses_create_params`), per source split."""

    type: Literal["nemo_gym"]


class VerifiersConfig(_FilesConfig):
    """verifiers taskset rows (`prompt` or `question`, `answer`, `info`, `task`), per source
    split: JSON Lines, Parquet, or a folder written by `Dataset.save_to_disk` (or
    `DatasetDict.save_to_disk`: its split of the same name, or name `folder/split`)."""

    type: Literal["verifiers"]


class _ConvertedSource(_FileSource):
    """JSON Lines whose every line is converted to a flat row before it is cached."""

    suffix = ".jsonl"

    def convert(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        raise NotImplementedError

    def _rows(self, path: Path) -> Iterator[dict[str, Any]]:
        yield from self._lines(path)

    def _lines(self, path: Path) -> Iterator[dict[str, Any]]:
        for where, line in json_lines(path, self.encoding_of(path)):
            yield self.convert(line, where)

    def stream(self, path: Path, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
        return stream_objects(self._rows(path), path)

    def read(self, path: Path) -> pa.Table:
        return table_of_any(list(self._rows(path)))


def _flat(value: Any) -> Any:
    """A column value: objects, and lists holding objects or lists, as JSON text (their shapes
    differ from row to row, which one table column cannot hold)."""
    nested = isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(v, dict | list) for v in value)
    )
    return json.dumps(value, ensure_ascii=False) if nested else value


def _text(content: Any, where: str) -> str:
    """The text of a message's content: a string, or text parts (`input_text`, `text`, ...)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        if all(isinstance(p, str) for p in parts) and parts:
            return "".join(parts)  # type: ignore[arg-type]
    raise DataError(
        f"{where}: a message's content is neither text nor text parts: {json.dumps(content)[:80]}",
        hint="Only text prompts can be imported",
        code="data_unreadable",
    )


def _turn(item: Any, where: str) -> dict[str, str]:
    role = item.get("role") if isinstance(item, dict) else None
    # `or`: a dataset's struct column gives every message every key (absent ones as None)
    if role not in _ROLES or (item.get("type") or "message") != "message":
        kind = item.get("type", role) if isinstance(item, dict) else type(item).__name__
        raise DataError(
            f"{where}: the prompt holds a {kind!r} item; only system, user and assistant messages are read",
            hint="Import tasks whose prompt is messages only",
            code="data_unreadable",
        )
    return {"role": _ROLES[role], "content": _text(item.get("content"), where)}


def _with_prompt(row: dict[str, Any], messages: list[dict[str, str]]) -> dict[str, Any]:
    users = [m["content"] for m in messages if m["role"] == "user"]
    return {
        **{k: _flat(v) for k, v in row.items()},
        "messages": messages,
        "prompt": users[-1] if users else "",
    }


class NemoGymSource(_ConvertedSource):
    Config = NemoGymConfig

    def convert(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        params = line.get("responses_create_params")
        if not isinstance(params, dict):
            raise DataError(
                f"{where}: no `responses_create_params` object: not a NeMo Gym task line",
                hint="Each line of a NeMo Gym task file holds the Responses API request it starts",
                code="data_unreadable",
            )
        messages = []
        if isinstance(params.get("instructions"), str):
            messages.append({"role": "system", "content": params["instructions"]})
        given = params.get("input")
        if isinstance(given, str):
            messages.append({"role": "user", "content": given})
        elif isinstance(given, list):
            messages += [_turn(item, where) for item in given]
        else:
            raise DataError(f"{where}: `responses_create_params.input` is missing", code="data_unreadable")
        if not messages:
            raise DataError(
                f"{where}: the task's prompt is empty (`responses_create_params.input` holds no message)",
                hint="Its resources server makes the prompt when the episode starts, which an import "
                "cannot do; import tasks whose lines hold their prompt",
                code="data_unreadable",
            )
        others = {k: v for k, v in line.items() if k != "responses_create_params"}
        tools = params.get("tools")
        return {**_with_prompt(others, messages), "tools": json.dumps(tools) if tools else None}


class VerifiersSource(_ConvertedSource):
    Config = VerifiersConfig

    def open(self, split: str) -> Table:
        key = f"dataset.files.{split}"
        return super().open_files(self._resolved(self.config.files[split], split, key), key)

    def open_files(self, files: PathOrPaths, key: str) -> Table:
        return super().open_files(self._resolved(files, None, key), key)

    def files(self) -> list[Path]:
        found: set[Path] = set()
        for split, patterns in self.config.files.items():
            key = f"dataset.files.{split}"
            for pattern in [patterns] if isinstance(patterns, str) else patterns:
                if is_url(pattern):
                    continue
                for item in self._resolved(pattern, split, key, listing=True):
                    found |= set(resolve_paths(item, self.base_dir, key, self.suffix, remote=False))
        return sorted(found)

    def _resolved(
        self, patterns: PathOrPaths, split: str | None, key: str = "", *, listing: bool = False
    ) -> list[str]:
        """``patterns`` with every folder written by ``save_to_disk`` replaced by its Arrow
        shards (with ``listing``: and its ``state.json``, ``dataset_info.json`` and
        ``dataset_dict.json``, the files a pack must carry to read it again)."""
        key = key or f"dataset.files.{split}"
        out: list[str] = []
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            folder = Path(pattern).expanduser()
            folder = folder if folder.is_absolute() else self.base_dir / folder
            if is_url(pattern) or not folder.is_dir():
                out.append(pattern)
                continue
            meta: list[Path] = []
            if (folder / "dataset_dict.json").is_file():
                meta.append(folder / "dataset_dict.json")
                folder = _dict_split(folder, pattern, split, key)
            if (folder / "state.json").is_file():
                meta += [p for p in (folder / "state.json", folder / "dataset_info.json") if p.is_file()]
                out += [str(p) for p in _shards(folder, pattern)]
                out += [str(p) for p in meta] if listing else []
            else:  # a plain folder: its JSON Lines and Parquet files
                found = sorted([*folder.glob("*.jsonl"), *folder.glob("*.parquet")])
                out += [str(p) for p in found] if found else [pattern]  # none: resolve_paths says so
        return out

    def _rows(self, path: Path) -> Iterator[dict[str, Any]]:
        if path.suffix not in (".parquet", ".arrow"):
            yield from self._lines(path)
            return
        number = 0
        for batch in _batches(path):
            for row in batch.to_pylist():
                number += 1
                yield self.convert(row, f"{path.parent.name}/{path.name} row {number}")

    def convert(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        prompt = line.get("prompt")
        if isinstance(prompt, list):
            messages = [_turn(m, where) for m in prompt]
        elif isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
        elif isinstance(line.get("question"), str):
            messages = [{"role": "user", "content": line["question"]}]
        else:
            raise DataError(
                f"{where}: neither `prompt` nor `question`: not a verifiers taskset row",
                hint="A verifiers row holds its prompt (messages) or its question",
                code="data_unreadable",
            )
        if isinstance(line.get("system_prompt"), str) and not any(m["role"] == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": line["system_prompt"]})
        others = {k: v for k, v in line.items() if k != "prompt"}
        return _with_prompt(others, messages)


def _dict_split(folder: Path, pattern: str, split: str | None, key: str) -> Path:
    """The folder of ``split`` in a folder ``DatasetDict.save_to_disk`` wrote."""
    try:
        names = [str(n) for n in json.loads((folder / "dataset_dict.json").read_text())["splits"]]
    except (ValueError, KeyError, TypeError, OSError):
        raise DataError(
            f"{pattern!r}: its dataset_dict.json does not list the splits",
            hint="Save the dataset again with DatasetDict.save_to_disk",
            code="data_unreadable",
        ) from None
    if split in names:
        return folder / split
    example = f"{pattern.rstrip('/')}/{names[0] if names else 'SPLIT'}"
    raise DataError(
        f"{key}: {pattern!r} is a DatasetDict folder (splits: {', '.join(names) or 'none'})"
        + (f" without a split {split!r}" if split else ""),
        hint=f"Name one split's folder, e.g. {example!r}",
        code="data_not_found",
    )


def _shards(folder: Path, pattern: str) -> list[Path]:
    """The Arrow shards of a ``Dataset.save_to_disk`` folder, in the order its state.json lists."""
    try:
        state = json.loads((folder / "state.json").read_text())
        names = [str(f["filename"]) for f in state["_data_files"]]
    except (ValueError, KeyError, TypeError, OSError):
        raise DataError(
            f"{pattern!r}: its state.json does not list the data files (`_data_files`)",
            hint="Save the dataset again with Dataset.save_to_disk",
            code="data_unreadable",
        ) from None
    shards = [folder / n for n in names]
    if not shards or any(Path(n).name != n or not p.is_file() for n, p in zip(names, shards, strict=True)):
        raise DataError(
            f"{pattern!r}: state.json lists {names}, which are not all files of the folder",
            hint="Copy the whole folder Dataset.save_to_disk wrote",
            code="data_not_found",
        )
    return shards


def _batches(path: Path) -> Iterator[pa.RecordBatch]:
    """The record batches of a Parquet file or of an Arrow shard (``datasets`` writes the IPC
    stream format; the file format is read too)."""
    if path.suffix == ".parquet":
        yield from pq.ParquetFile(path).iter_batches(batch_size=1024)
        return
    with pa.memory_map(str(path)) as source:
        try:
            reader: Any = pa.ipc.open_stream(source)
        except pa.ArrowInvalid:
            source.seek(0)
            reader = pa.ipc.open_file(source)
            yield from (reader.get_batch(i) for i in range(reader.num_record_batches))
            return
        yield from reader
