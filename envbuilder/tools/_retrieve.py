"""The ``retrieve`` tool: BM25 search (the ``bm25s`` library) over passages of the task or of a split.

Passages come either from a task field holding a list (of strings, or of dicts rendered by
``text``), or from every row of another split of the spec. A split's index is built once, on
the first call, in a worker thread; a task's passages are indexed per call (they are few) and
the last indexes are kept. Calls run off the event loop (``blocking``), so a large corpus
never stalls other sessions.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from envbuilder.errors import EnvbuilderError, ToolError
from envbuilder.spec import ParamSpec
from envbuilder.templating import Template
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply

MAX_CORPUS = 200_000
"""The most passages a split index may hold (its memory and build time are bounded)."""


class RetrieveConfig(ToolConfig):
    """Search passages with BM25 and return the best `k`."""

    type: Literal["retrieve"]
    field: str | None = None
    """A task field holding the passages: a list of strings, or of dicts (see `text`)."""
    split: str | None = None
    """Instead of `field`: search every row of this split (one of `splits:`)."""
    text: str | None = None
    """A Jinja template making a passage's text from a dict passage or a split's row, e.g.
    `{{ title }}: {{ text }}` (default: the passage itself, or the row's `text` field)."""
    k: int = Field(default=3, ge=1, le=50)
    """How many passages a call returns at most (the agent may ask for fewer)."""
    separator: str = "\n\n"
    """Text between the returned passages."""

    @model_validator(mode="after")
    def _one_corpus(self) -> RetrieveConfig:
        if (self.field is None) == (self.split is None):
            raise ValueError("give exactly one of `field` or `split`")
        return self


class RetrieveTool(Tool):
    Config = RetrieveConfig
    config: RetrieveConfig
    description = "Search the documents and return the passages most relevant to the query."
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "query": ParamSpec(
            description="What to search for (keywords work best).", min_length=1, max_length=1000
        ),
        "k": ParamSpec(type="integer", description="How many passages to return.", required=False, minimum=1),
    }
    reads_input = frozenset({"query"})
    blocking = True

    def __init__(self, config: RetrieveConfig, context: ToolContext):
        super().__init__(config, context)
        _bm25s()  # checked at load time, used in worker threads
        self._text: Template | None = None
        if config.text is not None:
            try:
                self._text = Template(config.text, name=f"{self.name}.text", base_dir=context.base_dir)
            except EnvbuilderError as exc:
                raise ToolError(exc.message, loc=("text",), hint=exc.hint, code=exc.code) from None
        if config.split is not None and config.split not in context.splits:
            raise ToolError(
                f"unknown split {config.split!r}",
                loc=("split",),
                hint=f"Splits: {', '.join(context.splits)}",
                code="tool_split",
            )
        self._split_index: _Index | None = None
        self._lock = threading.Lock()

    @property
    def fields(self) -> frozenset[str]:
        if self.config.field is not None:
            return frozenset({self.config.field})
        return frozenset()

    names_fields = True

    @property
    def fields_at(self) -> tuple[str | int, ...]:
        return ("field",)

    async def run(self, call: ToolCall) -> ToolReply:
        query = str(call.args["query"])
        k = int(call.args.get("k") or self.config.k)
        k = max(1, min(k, self.config.k))
        if self.config.split is not None:
            hits = await asyncio.to_thread(self._search_split, query, k)
        else:
            hits = await asyncio.to_thread(lambda: _index_of(self._task_passages(call.task)).search(query, k))
        if not hits:
            raise ToolError(f"no passage matches {query!r}")
        text = self.config.separator.join(f"[{rank}] {passage}" for rank, passage in enumerate(hits, 1))
        return ToolReply.text(text)

    def _passages(self, items: Sequence[Any]) -> tuple[str, ...]:
        if self._text is not None:
            contexts = [item if isinstance(item, dict) else {"passage": item} for item in items]
            return tuple(text.strip() for text in self._text.render_each(contexts))
        return tuple(str(item.get("text", "")) if isinstance(item, dict) else str(item) for item in items)

    def _task_passages(self, task: dict[str, Any]) -> tuple[str, ...]:
        assert self.config.field is not None
        value = task.get(self.config.field)
        if not isinstance(value, Sequence) or isinstance(value, str | bytes):
            raise ToolError(
                f"this task has no passages to search (field {self.config.field!r} is not a list)"
            )
        try:
            return self._passages(value[:MAX_CORPUS])
        except EnvbuilderError as exc:
            raise ToolError(exc.message) from None

    def _search_split(self, query: str, k: int) -> list[str]:
        with self._lock:  # one build, whichever call comes first
            if self._split_index is None:
                assert self.config.split is not None
                view = self.context.splits[self.config.split]
                rows = view.task_range(0, min(len(view), MAX_CORPUS))
                self._split_index = _Index(self._passages(rows))
        return self._split_index.search(query, k)


class _Index:
    """A BM25 index over passages."""

    def __init__(self, passages: tuple[str, ...]):
        bm25s = _bm25s()
        self.passages = passages
        self._bm25 = bm25s.BM25()
        tokens = bm25s.tokenize(list(passages), return_ids=False, show_progress=False)
        self._bm25.index(tokens, show_progress=False)
        self._tokenize = functools.partial(bm25s.tokenize, return_ids=False, show_progress=False)

    def search(self, query: str, k: int) -> list[str]:
        if not self.passages:
            return []
        found, scores = self._bm25.retrieve(
            self._tokenize([query]), k=min(k, len(self.passages)), show_progress=False, n_threads=1
        )
        return [self.passages[int(i)] for i, s in zip(found[0], scores[0], strict=True) if s > 0]


@functools.lru_cache(maxsize=64)
def _index_of(passages: tuple[str, ...]) -> _Index:
    """The index of a task's passages (the last few are kept: an episode searches one task)."""
    return _Index(passages)


def _bm25s() -> Any:
    """The optional ``bm25s`` module (the ``retrieve`` extra), or a located ToolError saying how
    to install it."""
    try:
        import bm25s
    except ImportError:
        raise ToolError(
            "the retrieve tool needs the `bm25s` package",
            loc=("type",),
            hint="pip install 'envbuilder[retrieve]'",
            code="tool_dependency",
        ) from None
    return bm25s
