"""JSONL, JSON and CSV files as lazy tables: converted once into the cache's Arrow row files.

The first open streams the files, a block at a time, into an Arrow IPC file of small batches
keyed by the files' identity (see ``_cache``); every later open, and every row read, goes to that
file, as Parquet does (`_parquet`): start-up reads no rows and a task reads one small batch.

Streaming takes the columns and their types from the first block (4 MB) of the first file.
A later block that disagrees (a new key, an int column turning into text) makes the conversion
start again reading each file whole, whose types pyarrow then unifies: correct, at the memory
cost of one file, and only for such files.

A CSV file has no types: its values are text, and a column is a number only when every value
in it is written exactly as that number is (``5``, ``2.5``, but not ``00501``, ``1.10``, ``+5``,
``1e3``), so that a template or the task JSON shows each value as the file has it.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
from pydantic import Field, field_validator

from envbuilder.data._base import Source, SourceConfig, Table
from envbuilder.data._cache import cache_key, cache_path, file_identity
from envbuilder.data._encoding import detect_encoding, first_undecodable, text_encoding
from envbuilder.data._ipc import IpcTable, write_ipc
from envbuilder.data._parquet import PathOrPaths, resolve_paths
from envbuilder.errors import DataError


class _FilesConfig(SourceConfig):
    files: dict[str, PathOrPaths] = Field(min_length=1)
    """Source split name → a file, a glob, a directory, or a list of these; relative to the spec file;
    or the `s3://`, `gs://`, `https://` or `hf://` URL of one file (fetched once into the cache)."""
    encoding: str = "utf-8"
    """The files' text encoding, e.g. `cp1252` or `latin-1` for legacy CSV exports (default
    UTF-8). A file that is not valid text in it is refused, naming the encoding it reads as. A
    file that begins with a byte-order mark (UTF-8, UTF-16, UTF-32) is read as its mark says."""

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        try:
            return codecs.lookup(value).name
        except LookupError:
            raise ValueError(f"unknown text encoding {value!r} (e.g. utf-8, cp1252, latin-1)") from None


class JsonlConfig(_FilesConfig):
    """Local JSON Lines files (one JSON object per line), per source split."""

    type: Literal["jsonl"]


class JsonConfig(_FilesConfig):
    """Local JSON files holding an array of objects (or `{"data": [...]}`), per source split."""

    type: Literal["json"]


class CsvConfig(_FilesConfig):
    """Local CSV files with a header row, per source split."""

    type: Literal["csv"]


class _FileSource(Source):
    config: _FilesConfig
    suffix: ClassVar[str]
    revision: ClassVar[int] = 0
    """Raised when the rows a file converts to change, so that no cached conversion is reused."""
    exact: ClassVar[bool] = False
    """A later block's column is never cast to the first block's type (CSV: ``5`` of an int
    block is not ``5.0`` of a float column); a block that differs reads the files whole."""

    def split_names(self) -> list[str]:
        return list(self.config.files)

    def open(self, split: str) -> Table:
        return self.open_files(self.config.files[split], f"dataset.files.{split}")

    def open_files(self, files: PathOrPaths, key: str) -> Table:
        paths = resolve_paths(files, self.base_dir, key, suffix=self.suffix)
        encoding = self.config.encoding
        key = cache_key(
            self.type_name,
            file_identity(paths),
            *([encoding] if encoding != "utf-8" else []),
            *([f"revision {self.revision}"] if self.revision else []),
        )
        path = cache_path("rows", key, ".arrow")
        if not path.exists():
            try:
                try:
                    first = next(iter(self.stream(paths[0])))  # an empty file: read whole below
                    _unique_names(first.schema, paths[0])
                    _check_text(first.schema, paths, encoding)
                    write_ipc(path, first.schema, _conformed(paths, first.schema, self.stream, self.exact))
                except (
                    pa.ArrowInvalid,
                    pa.ArrowTypeError,
                    pa.ArrowNotImplementedError,
                    _Disagrees,
                    StopIteration,
                ):
                    schema, tables = self.read_all(paths)
                    _check_text(schema, paths, encoding)
                    write_ipc(path, schema, tables)
            except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, OSError) as exc:
                not_text = _not_text(paths, encoding)
                if not_text is not None:
                    raise not_text from None
                raise DataError(
                    f"cannot read {self.type_name} data: {exc}",
                    code="data_unreadable",
                    hint=f"Check that the files are valid {self.suffix} files",
                ) from None
        return IpcTable(path)

    def location(self, split: str) -> tuple[str | int, ...]:
        return ("dataset", "files", split)

    def encoding_of(self, path: Path) -> str:
        """The text encoding ``path`` is read in: its byte-order mark's, else ``encoding:``."""
        return text_encoding(path, self.config.encoding)

    def files(self) -> list[Path]:
        found = (
            resolve_paths(p, self.base_dir, f"dataset.files.{s}", suffix=self.suffix, remote=False)
            for s, p in self.config.files.items()
        )
        return sorted({path for paths in found for path in paths})

    def stream(self, path: Path, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
        """The rows of ``path`` a block at a time (the first block fixes the columns: ``schema``,
        once there is one, which a source may read its blocks to)."""
        raise NotImplementedError

    def read(self, path: Path) -> pa.Table:
        """All the rows of ``path``, types inferred over the whole file."""
        raise NotImplementedError

    def read_all(self, paths: list[Path]) -> tuple[pa.Schema, Iterator[pa.Table]]:
        """Whole files, whose types pyarrow unifies (a column all null in one file takes another
        file's type): their schema and tables."""
        tables = [self.read(p) for p in paths]
        _check_columns(paths, [t.schema for t in tables])
        schema = pa.unify_schemas([t.schema for t in tables], promote_options="permissive")
        return schema, _unified(tables, schema)


_BLOCK = 4 << 20  # bytes per parsed block: bounds the memory of a conversion
_PYARROW_BLOCK = 1 << 20  # pyarrow's own default block for one parse (its threads split on it)
_MAX_PYARROW_BLOCK = (1 << 31) - 1  # its block size is a 32-bit int
_JSON_ROWS = 8192  # rows per batch of a JSON array


class _Disagrees(ValueError):
    """A later block does not fit the columns of the first: convert whole files instead."""


def _conformed(paths: list[Path], schema: pa.Schema, stream: Any, exact: bool) -> Iterator[pa.RecordBatch]:
    """Every block of every file, cast to ``schema`` (raises :class:`_Disagrees` if one cannot be,
    or, ``exact``, if a column of it has another type than null)."""
    for path in paths:
        for batch in stream(path, schema):
            if batch.schema.equals(schema):
                yield batch
                continue
            if set(batch.schema.names) - set(schema.names):
                raise _Disagrees(f"{str(path)!r} has other columns")
            if exact and any(
                not f.type.equals(schema.field(f.name).type) and not pa.types.is_null(f.type)
                for f in batch.schema
            ):
                raise _Disagrees(f"{str(path)!r} has a column of another type")
            columns = [
                batch.column(name).cast(field.type) if name in batch.schema.names
                else pa.nulls(batch.num_rows, field.type)
                for name, field in zip(schema.names, schema, strict=True)
            ]  # fmt: skip
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _unique_names(schema: pa.Schema, path: Path) -> None:
    """Each column of ``path`` has a name of its own (a CSV header can repeat one: a task would
    silently hold only the last column of the name)."""
    seen: dict[str, int] = {}
    for number, name in enumerate(schema.names, 1):
        if name in seen:
            raise DataError(
                f"{str(path)!r} has two columns named {name!r} (columns {seen[name]} and {number})",
                hint="Rename one in the file's header (a task holds one value per name)",
                code="data_schema_mismatch",
            )
        seen[name] = number


def _check_columns(paths: list[Path], schemas: list[pa.Schema]) -> None:
    """Each file's columns have names of their own, and all files have the same."""
    for p, schema in zip(paths, schemas, strict=True):
        _unique_names(schema, p)
    for p, schema in zip(paths[1:], schemas[1:], strict=True):
        if schema.names != schemas[0].names:
            raise DataError(
                f"{str(p)!r} has columns {schema.names}, but {str(paths[0])!r} has {schemas[0].names}",
                hint="All files of one split must share columns",
                code="data_schema_mismatch",
            )


def _unified(tables: list[pa.Table], schema: pa.Schema) -> Iterator[pa.Table]:
    for t in tables:
        yield t if t.schema.equals(schema) else t.select(schema.names).cast(schema)


class JsonlSource(_FileSource):
    Config = JsonlConfig
    suffix = ".jsonl"

    def stream(self, path: Path, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
        # Whole lines, a block at a time, each parsed on its own with the first block's columns:
        # pyarrow's own streaming JSON reader reads ahead without bound (its peak memory grows
        # with the file), this stays at a few blocks. Each file is typed by its own first block
        # (`_conformed` casts it to the first file's).
        schema = None
        for block in _line_blocks(path, _BLOCK, self.encoding_of(path)):
            if schema is None:
                table = _json_table(block)
                schema = table.schema
            else:
                options = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
                table = _json_table(block, options)
            if _rounded(table):
                raise _Disagrees("an integer may be too large for 64 bits")
            yield from table.to_batches()

    def read(self, path: Path) -> pa.Table:
        try:
            table = _json_table(_as_utf8(path.read_bytes(), self.encoding_of(path)))
            if not _rounded(table):
                return table
        except pa.ArrowInvalid:
            pass
        # pyarrow's reasons name neither the line nor (for a column that is a number in one row
        # and text in another) a way out: each line parsed here says both.
        return table_of_any([row for _, row in json_lines(path, self.encoding_of(path))])


class JsonSource(_FileSource):
    Config = JsonConfig
    suffix = ".json"

    def stream(self, path: Path, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
        return stream_objects(_array_items(path, self.encoding_of(path)), path)

    def read(self, path: Path) -> pa.Table:
        with open(path, encoding=self.encoding_of(path)) as f:
            data = json.load(f, parse_int=_integer)
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ValueError(f'{str(path)!r} must hold an array of objects (or {{"data": [...]}})')
        return table_of_any(data)


class CsvSource(_FileSource):
    Config = CsvConfig
    suffix = ".csv"
    revision = 1  # 1: columns typed only when exact (pyarrow's inference read `00501` as 501)
    exact = True

    def stream(self, path: Path, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
        encoding = self.encoding_of(path)
        options = pcsv.ReadOptions(block_size=_BLOCK, encoding=encoding)
        names = pcsv.open_csv(path, read_options=options).schema.names
        reader = pcsv.open_csv(path, read_options=options, convert_options=_as_text(names))
        for batch in reader:
            batch = _with_numbers(batch, schema)
            schema = schema or batch.schema
            yield batch

    def read(self, path: Path) -> pa.Table:
        return _with_numbers(self.read_text(path))

    def read_all(self, paths: list[Path]) -> tuple[pa.Schema, Iterator[pa.Table]]:
        # One decision per column over every file: `5` in one file and `2.5` in another is text.
        texts = [self.read_text(p) for p in paths]
        _check_columns(paths, [t.schema for t in texts])
        table = _with_numbers(pa.concat_tables(texts))
        return table.schema, iter([table])

    def read_text(self, path: Path) -> pa.Table:
        """All the rows of ``path``, every column text as the file writes it. (A row longer than
        a streamed block ends the stream with ArrowInvalid: the file is read whole here, in one
        block if it must be.)"""
        encoding = self.encoding_of(path)

        def options(size: int) -> pcsv.ReadOptions:
            return pcsv.ReadOptions(block_size=size, encoding=encoding)

        size = path.stat().st_size
        names = _one_block_if_needed(
            lambda n: pcsv.open_csv(path, read_options=options(n)).schema.names, size
        )
        return _one_block_if_needed(
            lambda n: pcsv.read_csv(path, read_options=options(n), convert_options=_as_text(names)), size
        )


def _as_text(names: list[str]) -> pcsv.ConvertOptions:
    """Every column read as text: "" for an empty cell, `NA`, `true`, `2024-01-05` as written."""
    return pcsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()))


_Data = TypeVar("_Data", pa.Table, pa.RecordBatch)


def _with_numbers(data: _Data, schema: pa.Schema | None = None) -> _Data:
    """``data`` (CSV columns of text) with each column that holds numbers exactly as it writes
    them (:func:`_as_number`) made a number column, and each with no value at all a null one;
    but a column that is text in ``schema`` (an earlier block's) stays text."""
    text = {f.name for f in schema if pa.types.is_string(f.type)} if schema is not None else set()
    columns = [
        column if name in text else _as_number(column)
        for name, column in zip(data.schema.names, data.columns, strict=True)
    ]
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, names=data.schema.names)
    return pa.Table.from_arrays(columns, names=data.schema.names)


def _as_number(text: Any) -> Any:
    """A column of text as int64 when each value is an integer's own text (``5``, ``-3``; not
    ``007``, ``+5``, ``-0``), as float64 when each is a float's own text, as Python writes it
    (``2.5``, ``5.0``, ``1e+300``; not ``1.10``, ``1e3``, ``nan``); else the text unchanged.
    Empty cells are no value in a number column. Vectorised: text is cast to the number and
    back, and compared."""
    import pyarrow.compute as pc  # (here: 26 ms to import, for CSV files only)

    values = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    if values.null_count == len(values):
        return _nulls(text)
    try:
        integers = pc.cast(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    else:  # (an integer's text never reads back as a float's, which has a `.` or an `e`)
        return integers if pc.all(pc.equal(pc.cast(integers, pa.string()), values)).as_py() else text
    try:
        floats = pc.cast(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return text
    return floats if _written_as_python_does(floats, values) else text


def _nulls(like: Any) -> Any:
    if isinstance(like, pa.ChunkedArray):
        return pa.chunked_array([pa.nulls(len(like))], pa.null())
    return pa.nulls(len(like))


def _written_as_python_does(floats: Any, texts: Any) -> bool:
    """Each of ``texts`` is ``repr()`` of its float of ``floats`` (what a template and the task
    JSON show). pyarrow writes floats with the same shortest digits but its own layout (``5``
    for 5.0, ``1e-9`` for 1e-09, ``1.5e+10`` for 15000000000.0): where the two layouts agree the
    check is vectorised, the other values are compared in Python."""
    import pyarrow.compute as pc

    if not pc.all(pc.is_finite(floats)).as_py():
        return False  # `nan`, `inf`: text (JSON has no such numbers)
    arrow = pc.cast(floats, pa.string())
    size = pc.abs(floats)
    # Python writes these positionally (as pyarrow does, when it does): 0.0001 <= |x| < 1e16
    positional = pc.and_(
        pc.or_(pc.equal(floats, 0), pc.and_(pc.greater_equal(size, 1e-4), pc.less(size, 1e16))),
        pc.invert(pc.match_substring(texts, "e")),
    )
    agree = pc.or_(
        pc.and_(
            positional,
            pc.or_(
                pc.and_(pc.equal(arrow, texts), pc.match_substring(texts, ".")),
                pc.equal(pc.binary_join_element_wise(arrow, ".0", ""), texts),  # 5 → 5.0
            ),
        ),
        pc.and_(  # Python's exponent of two or more digits, as pyarrow's
            pc.greater_equal(size, 1e16), pc.and_(pc.equal(arrow, texts), pc.match_substring(texts, "e+"))
        ),
    )
    rest = pc.invert(pc.fill_null(agree, True))
    left = zip(pc.filter(floats, rest).to_pylist(), pc.filter(texts, rest).to_pylist(), strict=True)
    return all(repr(number) == written for number, written in left)


_INT64 = range(-(1 << 63), 1 << 63)


def _rounded(data: pa.Table | pa.RecordBatch | pa.ChunkedArray | pa.Array) -> bool:
    """``data`` holds a float of 2^63 or more in size, anywhere in it (lists and objects too):
    perhaps an integer too large for 64 bits, which pyarrow's text readers make a float (rounded,
    and every other number of its column a float: ``5`` shown as ``5.0``). The file is then read
    exactly; a real float that large only costs that slower read."""
    import pyarrow.compute as pc  # (here: 26 ms to import, for files with floats only)

    if isinstance(data, pa.Table | pa.RecordBatch):
        return any(_rounded(column) for column in data.columns)
    kind = data.type
    if pa.types.is_floating(kind):
        largest = pc.max(pc.abs(data))
        return largest.is_valid and largest.as_py() >= _2_63
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _rounded(pc.list_flatten(data))
    if pa.types.is_struct(kind):
        return any(_rounded(pc.struct_field(data, [i])) for i in range(kind.num_fields))
    return False


_2_63 = float(1 << 63)


def _too_long(value: Any) -> bool:
    """``value`` is an integer (or an integer's text) outside 64 bits."""
    if isinstance(value, str):
        digits = value.strip().lstrip("+-")
        if not (digits.isascii() and digits.isdigit()):
            return False
        if len(digits.lstrip("0")) > 19:  # (no int() of it: Python refuses one of 4,300 digits)
            return True
        value = int(digits)
    return isinstance(value, int) and not isinstance(value, bool) and value not in _INT64


def _integer(digits: str) -> int | str:
    """A JSON integer; one of more digits than Python's int() reads (4,300) stays its text (a
    field holding it is then text in every row, as any integer over 64 bits makes it)."""
    return int(digits) if len(digits) <= 4000 else digits


def _holds_long(value: Any) -> bool:
    """``value`` (a JSON value) holds an integer outside 64 bits, at any depth."""
    if isinstance(value, int | str):
        return _too_long(value)
    if isinstance(value, list):
        return any(_holds_long(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_long(v) for v in value.values())
    return False


def _json_table(data: bytes, options: pjson.ParseOptions | None = None) -> pa.Table:
    """The JSON lines of ``data`` (whole lines) as a table."""
    return _one_block_if_needed(
        lambda size: pjson.read_json(
            io.BytesIO(data), read_options=pjson.ReadOptions(block_size=size), parse_options=options
        ),
        len(data),
    )


_Parsed = TypeVar("_Parsed")


def _one_block_if_needed(parse: Callable[[int], _Parsed], size: int) -> _Parsed:
    """``parse(block_size)`` with pyarrow's default block, else (a row longer than that block:
    pyarrow's "straddling object" error) once more with the ``size`` bytes as one block. Long
    rows are real data (a repository's files, a long document), not a malformed file."""
    try:
        return parse(_PYARROW_BLOCK)
    except pa.ArrowInvalid as exc:
        if "straddl" not in str(exc) or size < _PYARROW_BLOCK:
            raise
        return parse(min(size + 1, _MAX_PYARROW_BLOCK))


def _as_utf8(data: bytes, encoding: str) -> bytes:
    """``data`` as UTF-8 (without a byte-order mark); UnicodeDecodeError when it is not
    ``encoding`` text (pyarrow's JSON reader does not check: it would build strings that fail
    only when a row is read)."""
    text = data.decode(encoding)
    return data if encoding == "utf-8" else text.encode("utf-8")


def _check_text(schema: pa.Schema, paths: list[Path], encoding: str) -> None:
    """Text files hold text: a column pyarrow could only read as bytes (a CSV that is not valid
    in ``encoding``) is refused, never served as base64."""
    if any(pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) for f in schema):
        raise _not_text(paths, encoding) or DataError(
            f"columns {[f.name for f in schema if pa.types.is_binary(f.type)]} hold bytes, not text",
            code="data_encoding",
        )


def _not_text(paths: list[Path], declared: str) -> DataError | None:
    """Why the first file that is not valid text in its encoding (:func:`text_encoding`) is
    refused (None: all are)."""
    for path in paths:
        encoding = text_encoding(path, declared)
        bad = first_undecodable(path, encoding)
        if bad is None:
            continue
        offset, byte = bad
        guess = detect_encoding([path]) if encoding == "utf-8" else None
        reads = f"; it reads as {guess}" if guess else ""
        return DataError(
            f"{str(path)!r} is not {encoding} text (byte 0x{byte:02x} at offset {offset:,}){reads}",
            hint=f"Add `encoding: {guess or 'NAME'}` to `dataset:` (the files' text encoding)",
            code="data_encoding",
        )
    return None


def _line_blocks(path: Path, size: int, encoding: str) -> Iterator[bytes]:
    """The text of ``path`` as UTF-8, in blocks of about ``size`` that end at a line break;
    UnicodeDecodeError when it is not ``encoding`` text. (Only UTF-8 is cut as bytes: a UTF-16
    line break is two bytes, and only the first block would hold the byte-order mark.)"""
    with contextlib.ExitStack() as stack:
        if encoding == "utf-8":
            raw = stack.enter_context(open(path, "rb"))

            def read() -> bytes:
                return raw.read(size)

        else:
            text = stack.enter_context(open(path, encoding=encoding, newline=""))

            def read() -> bytes:
                return text.read(size).encode("utf-8")

        rest = b""
        while True:
            data = read()
            if not data:
                if rest.strip():
                    yield _as_utf8(rest, "utf-8")
                return
            data = rest + data
            cut = data.rfind(b"\n") + 1
            rest, block = (data, b"") if cut == 0 else (data[cut:], data[:cut])
            if block.strip():
                yield _as_utf8(block, "utf-8")


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` as a table with every field any of them has (pyarrow alone reads the first's)."""
    names = list(dict.fromkeys(key for row in rows for key in row))
    return pa.Table.from_pylist([{key: row.get(key) for key in names} for row in rows])


def table_of_any(rows: list[dict[str, Any]]) -> pa.Table:
    """:func:`table_of`, or, when a field's values differ in kind from row to row (one table
    column holds one type) or hold an integer over 64 bits, the table of :func:`uniform` ``rows``."""
    try:
        return table_of(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return table_of(uniform(rows))


def uniform(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each field whose values differ in kind (a number in one row and text in
    another; a list in one and an object in another, as NeMo Gym's ``declared_tools``: ``[]`` or
    tools) or that holds an integer over 64 bits holding text in every row: a string as it is,
    any other value as its JSON text (``7``, ``true``, ``[1, 2]``,
    ``123456789012345678901234567890``), so a template shows each as the file has it."""
    kinds: dict[str, set[str]] = {}
    for row in rows:
        for key, value in row.items():
            if value is not None:
                number = isinstance(value, int | float) and not isinstance(value, bool)
                kind = "long" if _holds_long(value) else "number" if number else type(value).__name__
                kinds.setdefault(key, set()).add(kind)
    mixed = {key for key, found in kinds.items() if len(found) > 1 or "long" in found}
    return [
        {
            k: json.dumps(v, ensure_ascii=False) if k in mixed and not isinstance(v, str | None) else v
            for k, v in row.items()
        }
        for row in rows
    ]


def json_lines(path: Path, encoding: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each object of the JSON Lines file ``path`` with where it is (``name:line``); blank lines
    are skipped, a leading byte-order mark too.

    Raises:
        DataError: a line is not a JSON object (it says which).
    """
    with open(path, encoding=encoding) as f:
        for number, text in enumerate(f, 1):
            if number == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            where = f"{path.name}:{number}"
            try:
                line = json.loads(text, parse_int=_integer)
            except ValueError as exc:
                raise DataError(f"{where}: not a JSON object ({exc})", code="data_unreadable") from None
            if not isinstance(line, dict):
                raise DataError(f"{where}: not a JSON object", code="data_unreadable")
            yield where, line


def stream_objects(rows: Iterable[dict[str, Any]], path: Path) -> Iterator[pa.RecordBatch]:
    """JSON objects as record batches: the first batch's keys (every key any of its rows has)
    make the schema; a key first seen further on is :class:`_Disagrees` (the file is then read
    whole)."""
    schema: pa.Schema | None = None
    for batch in _batched(rows, _JSON_ROWS):
        try:
            if schema is None:
                table = table_of(batch)
                schema = table.schema
            else:
                if any(key not in schema.names for row in batch for key in row):
                    raise _Disagrees(f"{str(path)!r} has other keys further on")
                table = pa.Table.from_pylist(batch, schema=schema)
        except OverflowError:
            raise _Disagrees("an integer is too large for 64 bits") from None
        yield from table.to_batches()


def _batched(items: Iterable[dict[str, Any]], n: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _array_items(path: Path, encoding: str) -> Iterator[dict[str, Any]]:
    """The objects of the JSON array in ``path``, parsed one at a time from a sliding buffer.

    A file that is not a top-level array (``{"data": [...]}``) raises :class:`_Disagrees`, so
    it is read whole."""
    decoder = json.JSONDecoder(parse_int=_integer)
    with open(path, encoding=encoding) as f:
        buf, pos, eof = f.read(1 << 20), 0, False

        def fill() -> bool:
            nonlocal buf, pos
            more = f.read(1 << 20)
            buf, pos = buf[pos:] + more, 0
            return bool(more)

        def skip(chars: str) -> None:
            nonlocal pos, eof
            while True:
                while pos < len(buf) and buf[pos] in chars:
                    pos += 1
                if pos < len(buf) or eof:
                    return
                eof = not fill()

        skip(" \t\r\n\ufeff")
        if buf[pos : pos + 1] != "[":
            raise _Disagrees(f"{str(path)!r} is not a JSON array")
        pos += 1
        while True:
            skip(" \t\r\n,")
            if buf[pos : pos + 1] == "]":
                return
            while True:
                try:
                    item, end = decoder.raw_decode(buf, pos)
                    break
                except json.JSONDecodeError:
                    if eof or not fill():
                        raise ValueError(f"{str(path)!r} is not valid JSON") from None
            if not isinstance(item, dict):
                raise ValueError(f'{str(path)!r} must hold an array of objects (or {{"data": [...]}})')
            pos = end
            yield item
