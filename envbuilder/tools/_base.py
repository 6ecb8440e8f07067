"""What a tool type implements, its config base, one call's inputs and reply, and the registry.

A tool type is a :class:`Tool` subclass with a ``Config`` (a :class:`ToolConfig` whose ``type``
is a ``Literal`` of its YAML name), registered in the ``envbuilder.tools`` entry-point group
exactly like graders and sources (``envbuilder/plugins.py``)::

    [project.entry-points."envbuilder.tools"]
    weather = "my_package.weather:WeatherTool"

The life of a tool:

* **Load time.** ``Tool(config, context)`` is built once per environment; ``context`` gives the
  spec's folder and its splits. Raise :class:`~envbuilder.errors.ToolError` (``loc`` inside the
  tool's block) for a bad config; :meth:`Tool.fields` names the task fields it reads, which
  ``validate`` checks against the data like a template's variables.
* **A call.** The environment validates the agent's input against the schema declared in the
  YAML (``input:``; refused calls never reach the tool), enforces ``max_calls``, then awaits
  :meth:`Tool.run` with a :class:`ToolCall`: the task, the validated arguments, the session's
  secrets and ``state``, the tool's own per-session dict. ``run`` returns a :class:`ToolReply`
  or raises ``ToolError``, whose message the agent gets as an error output (``ok: true`` with
  the text and ``metadata.error``): a failing call is never an HTTP error. Any other exception
  is a bug in the tool; the server reports it on the call's stream and keeps serving.
* **Per-session state.** ``call.state`` is stored in the session (``Episode.tool_state[name]``)
  and must hold plain JSON types only, and stay small: sessions are serialised with
  ``SessionRecord.to_dict`` (a shared store such as Redis keeps them between calls). Keep handles, not
  contents (a sandbox directory's path, not its files). Mutate it in place.
* **Blocking.** ``blocking`` (a class default; an instance may set it) says a call may wait on
  I/O or long work: such calls run as background tasks and stream SSE keep-alives. A
  non-blocking call runs inline and must finish in well under a millisecond of CPU, like a
  ``submit`` graded by ``exact_match``; CPU-heavy work belongs in a thread
  (``asyncio.to_thread``) of a blocking tool.
* **End of session.** When a session is deleted or expires, :meth:`Tool.end_session` is awaited
  with that session's ``state`` for every tool whose state is not empty (release a sandbox,
  delete a temporary folder). It must not raise; it may run after the server stopped serving
  the session, from a background task. :meth:`Tool.aclose` releases what the tool holds for
  the whole environment when the server stops.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from envbuilder.data import Task
from envbuilder.plugins import Plugin, Registry
from envbuilder.protocol import ContentBlock, TextBlock
from envbuilder.spec import ParamSpec, ToolConfig
from envbuilder.spec import tools as _tools

if TYPE_CHECKING:
    from pydantic import BaseModel

    from envbuilder.data import SplitView
    from envbuilder.isolation.sandbox import SessionContainers, Workspace
    from envbuilder.world import Document, World


@dataclass(frozen=True)
class ToolContext:
    """What a tool may need at load time besides its config."""

    base_dir: Path | None = None
    """The spec's folder, for relative files and templates."""
    splits: Mapping[str, SplitView] = field(default_factory=dict)
    """The environment's splits by name (a tool may search another split's rows)."""
    document: Document | None = None
    """The spec's initial state document (`state:`), when it declares one."""
    containers: SessionContainers | None = None
    """The session containers of the spec's `sandbox:`, when it declares one."""


@dataclass
class ToolCall:
    """One call of a tool, as :meth:`Tool.run` receives it."""

    task: Task
    """The episode's task (hidden fields included: do not echo gold answers)."""
    args: dict[str, Any]
    """The agent's input, validated against the tool's schema (defaults filled in)."""
    state: dict[str, Any]
    """This tool's per-session state: plain JSON types, small; mutate in place."""
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The session's secrets (API keys); never put them in an output, an error or a log."""
    document: World | None = None
    """The episode's state document (a spec's `state:`), for tools that set
    ``uses_document``; changes to it are kept in the session after the call."""
    workspace: Workspace | None = None
    """The session's container (a spec's `sandbox:`), for tools whose ``uses_sandbox`` is
    true; :meth:`~envbuilder.isolation.sandbox.Workspace.ensure` makes it on first use."""


@dataclass(frozen=True)
class ToolReply:
    """What a call returns to the agent."""

    blocks: list[ContentBlock]
    metadata: dict[str, Any] | None = None
    """JSON-ready details for the harness (not shown to the model by most harnesses)."""
    finished: bool = False
    """End the episode (a tool type may decide this per call; `terminal: true` always does)."""

    @classmethod
    def text(cls, text: str, **metadata: Any) -> ToolReply:
        return cls([TextBlock(text=text)], metadata or None)


class Tool(Plugin, abc.ABC):
    """A tool type; registered in ``envbuilder.tools`` under its ``Config.type``."""

    Config: ClassVar[type[ToolConfig]]
    description: ClassVar[str] = ""
    """The description offered when the spec gives none."""
    default_input: ClassVar[dict[str, ParamSpec]] = {}
    """The parameters when the spec declares no `input:`."""
    reads_input: ClassVar[frozenset[str]] = frozenset()
    """Parameters :meth:`run` reads: a spec's own `input:` must declare them."""
    blocking: bool = False
    """True when a call may wait on I/O or long work (then it streams with keep-alives)."""
    uses_document: ClassVar[bool] = False
    """Calls read or change the episode's state document (``ToolCall.document``); the spec
    must declare `state:`."""

    def __init__(self, config: Any, context: ToolContext):
        self.config = config
        self.context = context

    @property
    def uses_sandbox(self) -> bool:
        """Calls run in the session's container (``ToolCall.workspace``)."""
        return False

    @property
    def name(self) -> str:
        return str(self.config.name or self.config.type)

    @property
    def fields(self) -> frozenset[str]:
        """The task fields this tool reads (checked against the data at load time)."""
        return frozenset()

    @property
    def fields_at(self) -> tuple[str | int, ...]:
        """The key inside the tool's block that reads :attr:`fields` (where a missing field is
        reported), e.g. ``("template",)``."""
        return ()

    names_fields: ClassVar[bool] = False
    """True when the key at :attr:`fields_at` names a task field (``field: body``) rather than
    holding a template that reads fields (a missing one is reported as such)."""

    def expand(self) -> list[Tool]:
        """The tools this entry of `tools:` offers: itself, or several (an MCP server's)."""
        return [self]

    def input_model(self) -> type[BaseModel] | None:
        """The model a call's input is validated with, when the tool builds its own (from a
        function's signature, an MCP server's schema); None: from `input:` or ``default_input``."""
        return None

    @abc.abstractmethod
    async def run(self, call: ToolCall) -> ToolReply:
        """Run one call. Raise :class:`~envbuilder.errors.ToolError` for a failure the agent
        should read (bad expression, nothing found); never return secrets or gold answers."""

    async def end_session(self, state: dict[str, Any]) -> None:
        """Release what a session's calls left behind (called only when ``state`` is not empty)."""

    async def aclose(self) -> None:
        """Release what the tool holds for the whole environment."""


tools: Registry[type[Tool]] = _tools
"""The tool types, by YAML ``type:``."""
