"""A compiled spec: its splits and tasks, its prompt, its tools and grading, ready to serve."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envbuilder.data import SplitView, Task
from envbuilder.data._build import open_splits
from envbuilder.data._maps import position
from envbuilder.episode import Episode, SubmitTool
from envbuilder.episode.dialogue import DIALOGUE_VARIABLES, Dialogue
from envbuilder.episode.simulated_user import SimulatedUser
from envbuilder.episode.toolbox import Toolbox
from envbuilder.errors import (
    DataError,
    EnvbuilderError,
    Loc,
    Problem,
    SpecError,
    TaskNotFound,
    TemplateError,
    name_hint,
)
from envbuilder.graders import (
    TRAJECTORY,
    FieldUse,
    Grader,
    GraderConfigError,
    GraderContext,
    field_uses_of,
    graders,
)
from envbuilder.isolation.sandbox import SessionContainers
from envbuilder.llm import override_endpoints
from envbuilder.paths import check_inside
from envbuilder.prompting import Prompter
from envbuilder.protocol import (
    ContentBlock,
    ListToolsOutput,
    Message,
    RunToolError,
    RunToolSuccess,
    Split,
    TextBlock,
)
from envbuilder.spec import LoadedSpec, code_parts, code_problems, evaluation_split, load_spec, training_split
from envbuilder.templating import (
    Template,
    recording_files,
    render_limits,
    template_folders,
    template_globals,
)
from envbuilder.tools import Tool, ToolContext, tools
from envbuilder.world import Document

__all__ = ["Environment", "Episode", "load_environment"]

#: Names the `submit.feedback` template gets besides the task's fields.
_FEEDBACK_VARIABLES = frozenset(
    {"outcome", "score", "reason", "attempt", "attempts_left", "finished", "answer", "grade"}
)
Fail = Callable[[Loc, EnvbuilderError], None]
#: The recorded reward-hacking audit beside a spec (``gsm8k.yaml`` → ``gsm8k.hacks.json``), one of
#: its files when present (see envbuilder/catalog/_audit.py).
HACKS_RECORD_SUFFIX = ".hacks.json"


def _files(loaded: LoadedSpec, data: list[Path], templates: dict[str, Path]) -> dict[str, Path]:
    """Name every file read; a template found outside the spec's folder (one shipped with
    envbuilder) keeps the name the spec gave it, so a pack that puts it there serves that file."""
    base = loaded.base_dir.resolve()

    def name(path: Path) -> str:
        return Path(os.path.relpath(path, base)).as_posix()

    out = {name(path): path for path in [*loaded.files, *(p.resolve() for p in data)]}
    for given, path in templates.items():
        out[name(path) if path.is_relative_to(base) else Path(given).as_posix()] = path
    return dict(sorted(out.items()))


class Environment:
    """Everything a server needs to serve one spec; raises SpecError listing every problem."""

    def __init__(self, loaded: LoadedSpec, *, strict: bool = True, trust_code: bool | None = None):
        """Compile ``loaded``; with ``strict=False`` (for ``validate``) problems are kept in
        :attr:`problems` instead of raised, and the environment is only good for more checks.

        ``trust_code`` decides whether the spec's own code (a ``function`` module, an ``mcp``
        command) may run: True always, False never, None (the default) only when the spec lies
        in the user's own folders (see :mod:`envbuilder.spec._code`). Refused code is never
        imported or started: the refusal is a located problem, raised before anything is built.
        """
        spec, self.endpoints = override_endpoints(loaded.spec)
        """The model endpoints of the simulated user and the judges, as they will be used (with
        the overrides of the environment: ``ENVBUILDER_USER_BASE_URL`` …, see envbuilder.llm)."""
        if spec is not loaded.spec:
            loaded = dataclasses.replace(loaded, spec=spec)
        self.loaded = loaded
        self.spec = spec
        self.name = spec.name
        problems: list[Problem] = code_problems(loaded, trust_code)
        refused = {loc[:2] for loc, _, _ in code_parts(spec)} if problems else set()
        if problems and (strict or any(loc[:1] != ("tools",) for loc in refused)):
            # Nothing more is built (strict, or a refused part outside `tools:`, which the other
            # checks would build): the refusal is all there is to say.
            raise SpecError(problems)
        self._refused_tools = refused  # built without these; `validate` reports the rest
        self._named: set[Loc] = set()
        """The keys of ``used`` whose value names a task field (`choices_field: options`) rather
        than holding a template that reads them."""

        def fail(loc: Loc, exc: EnvbuilderError) -> None:
            problems.append(loaded.locate(loc, exc.message, code=exc.code, hint=exc.hint))

        self.source, self.splits, errors = open_splits(spec, loaded.base_dir)
        for loc, exc in errors:
            fail(loc, exc)

        limits = render_limits(spec.limits.render_seconds, spec.limits.render_chars)
        bases = template_folders(base.parent for base in loaded.positions.bases)  # their template files
        with limits, bases, recording_files() as templates:
            self.prompter: Prompter | None = self._compile_prompt(fail)
            used = dict(self.prompter.variables()) if self.prompter else {}
            self.submit: SubmitTool | None = self._compile_submit(used, fail)
            self.document: Document | None = self._document(used, fail)
            """The initial state document (`state:`), shared by every session."""
            self.containers = self._containers(fail)
            """The session containers of the spec's `sandbox:` (None without one)."""
            built, user_tools = self._tools(used, fail)
            authoring = self._authoring_fields(fail)
        self._read_fields(used, authoring)
        if self.splits:
            self._check_fields({**used, **authoring}, problems, fail)
        if not problems and self.prompter is not None:
            for where, problem in self._check_budgets():
                fail(where, problem)
        self.problems = problems
        if problems:
            if strict:
                raise SpecError(problems)
            return
        assert self.prompter is not None and self.submit is not None
        code = [p for t in built if (p := getattr(t, "source_file", None)) is not None]
        state_file = [loaded.base_dir / spec.state.file] if spec.state and spec.state.file else []
        code = [p for p in code if p.resolve().is_relative_to(loaded.base_dir.resolve())]
        profiles = [loaded.base_dir / s.profile for s in spec.splits.values() if s.profile is not None]
        record = loaded.path.with_name(loaded.path.stem + HACKS_RECORD_SUFFIX) if loaded.path else None
        audit = [record] if record is not None and record.is_file() else []
        self.files: dict[str, Path] = _files(
            loaded, [*self.source.files(), *state_file, *code, *profiles, *audit], templates
        )
        """Every file the environment was made of, by its path relative to the spec's folder
        (POSIX, may start with ``../``): the spec and its bases, the data files, and the template
        files of the prompt, the graders, the dialogue and the tools, and the recorded reward-hacking
        audit (``<stem>.hacks.json``) when there is one. Packs, content hashes and
        catalogs use this list."""
        self.toolbox = Toolbox(self.submit, built, self.document, self.containers, user_tools=user_tools)
        self.tools_listing = self.toolbox.listing
        """``/tools``: the answer tool and the shared tools."""
        self.task_tools_listing = self.toolbox.task_listing
        """``/task_tools``: every tool of a session, the task-scoped ones too."""

    # -- the compile steps: each builds one part and reports its problems through `fail` ----------

    def _compile_prompt(self, fail: Fail) -> Prompter | None:
        """The prompt (None when it cannot be built), its own checks reported."""
        try:
            prompter = Prompter(self.spec.prompt, self.loaded.base_dir, splits=self.splits)
        except EnvbuilderError as exc:
            fail(("prompt",), exc)
            return None
        for loc, problem in prompter.check():
            fail(loc, problem)
        return prompter

    def _compile_submit(self, used: dict[Loc, frozenset[str]], fail: Fail) -> SubmitTool | None:
        """The answer tool: the grader, and the dialogue, feedback and simulated user around it
        (None when the grader cannot be built); the fields each reads are added to ``used``."""
        spec, loaded = self.spec, self.loaded
        # An invalid `dialogue:` is reported on its own: its variables are not reported missing too.
        dialogue_vars = DIALOGUE_VARIABLES if self._declared("dialogue") else frozenset({TRAJECTORY})
        extra: frozenset[str] = dialogue_vars
        try:
            grader = graders.for_config(spec.grader)(spec.grader, GraderContext(base_dir=loaded.base_dir))
        except EnvbuilderError as exc:
            self._grader_failed(("grader",), exc, used, extra, fail)
            return None
        self._grader_fields(("grader",), field_uses_of(grader), used, extra)
        if not self._declared("state") and any(g.needs_state for g in grader.walk()):
            fail(
                ("grader",),
                EnvbuilderError(
                    "the grader compares the episode's state, and the spec declares no `state:`",
                    hint="Add `state: {file: db.json}` (or `field:`), or remove `state_match`",
                    code="grader_needs_state",
                ),
            )
        dialogue = transcript_grader = feedback = None
        if spec.dialogue is not None:
            dialogue, transcript_grader = self._dialogue(used, fail)
        if spec.submit.feedback is not None:
            try:
                feedback = Template(spec.submit.feedback, name="submit.feedback", base_dir=loaded.base_dir)
                used[("submit", "feedback")] = feedback.variables - _FEEDBACK_VARIABLES
            except EnvbuilderError as exc:
                fail(("submit", "feedback"), exc)
        user = self._user(used, fail) if spec.user is not None else None
        return SubmitTool(
            spec.submit,
            grader,
            dialogue=dialogue,
            transcript_grader=transcript_grader,
            feedback=feedback,
            user=user,
        )

    def _authoring_fields(self, fail: Fail) -> dict[Loc, frozenset[str]]:
        """The fields the keys only `envbuilder check` reads take from the task (`gold:` and
        `inaction:` templates, the `gold_actions` field), each template compiled: checked like
        the others' (a typo is found by `validate`), but never asked of a client's task."""
        out: dict[Loc, frozenset[str]] = {}
        for key in ("gold", "inaction"):
            text = getattr(self.spec, key)
            if text is not None:
                try:
                    out[(key,)] = Template(text, name=key, base_dir=self.loaded.base_dir).variables
                except EnvbuilderError as exc:
                    fail((key,), exc)
        if self.spec.gold_actions is not None:
            out[("gold_actions",)] = frozenset({self.spec.gold_actions})
        return out

    def _read_fields(self, used: dict[Loc, frozenset[str]], authoring: dict[Loc, frozenset[str]]) -> None:
        """Which task fields the parts read (:attr:`task_fields`) and which clients never see
        (:attr:`private_fields`); ``authoring``: the fields of the keys only `check` reads
        (:meth:`_authoring_fields`)."""
        prompt_fields = self.prompter.task_fields() if self.prompter else frozenset()
        self.task_fields: frozenset[str] = (
            prompt_fields | frozenset().union(*(names for loc, names in used.items() if loc[0] != "prompt"))
        ) - template_globals()
        """The task fields the prompt, the grader, the dialogue and the tools read: a client's
        `task_spec` must have them."""
        private = self.spec.task.private
        self.private_fields: frozenset[str] = (
            frozenset(private)
            if private is not None
            else (
                frozenset().union(*(names for loc, names in used.items() if loc[:1] == ("grader",)))
                | authoring.get(("gold",), frozenset())  # (the gold answer can be read off them)
            )
            - prompt_fields
            - template_globals()
            - {"id"}
        )
        """Task fields clients never see (by default the gold answer: what only the grader, or
        the spec's `gold:` answer, reads); see :meth:`public`."""

    def _check_fields(self, used: dict[Loc, frozenset[str]], problems: list[Problem], fail: Fail) -> None:
        """Every field a template reads is one the tasks have."""
        fields = {f for view in self.splits.values() for f in view.shaper.fields}
        if any(p.loc[:1] == ("task",) for p in problems):
            fields |= set(self.spec.task.rename.values())  # a misnamed column: reported once, above
        for loc, names in used.items():
            if loc in self._named:  # a key naming a field: no template globals stand in for it
                for var in sorted(set(names) - fields):
                    fail(
                        loc,
                        DataError(
                            f"the tasks have no field {var!r}",
                            hint=name_hint(var, sorted(fields), "Task fields"),
                            code="unknown_field",
                        ),
                    )
                continue
            for var in sorted(set(names) - fields - template_globals()):
                fail(
                    loc,
                    TemplateError(
                        f"the template uses {var!r}, which the tasks lack",
                        hint=name_hint(var, sorted(fields), "Task fields"),
                    ),
                )

    def _grader_fields(
        self, at: Loc, uses: list[FieldUse], used: dict[Loc, frozenset[str]], exclude: frozenset[str]
    ) -> None:
        """Add the fields a grader block at ``at`` reads to ``used``, each at the key that reads it
        (``grader.graders[1].pattern``), leaving out ``exclude`` (names the grader is given)."""
        for use in uses:
            loc = (*at, *use.at)
            used[loc] = used.get(loc, frozenset()) | (use.fields - exclude)
            if use.named:
                self._named.add(loc)

    def _grader_failed(
        self,
        at: Loc,
        exc: EnvbuilderError,
        used: dict[Loc, frozenset[str]],
        exclude: frozenset[str],
        fail: Fail,
    ) -> None:
        """Report every problem of a grader block at ``at`` that could not be built (each says
        where inside the block it is: `graders[1].type`), and still check the fields its parts
        that were built read."""
        errors = exc.errors if isinstance(exc, GraderConfigError) else [exc]
        for error in errors:
            fail((*at, *error.loc), error)
        if isinstance(exc, GraderConfigError):
            self._grader_fields(at, exc.field_uses, used, exclude)

    def _dialogue(self, used: dict[Loc, frozenset[str]], fail: Fail) -> tuple[Dialogue | None, Grader | None]:
        spec, loaded = self.spec, self.loaded
        assert spec.dialogue is not None
        problems = 0
        if spec.submit.max_attempts > 1:
            problems += 1
            fail(
                ("submit", "max_attempts"),
                EnvbuilderError(
                    "a dialogue takes one reply per user turn, so `max_attempts` must be 1",
                    hint="Remove `submit.max_attempts` or the `dialogue:` block",
                    code="dialogue_attempts",
                ),
            )
        if spec.submit.on_ungradeable == "retry":
            problems += 1
            fail(
                ("submit", "on_ungradeable"),
                EnvbuilderError(
                    "`retry` is not available in a dialogue (a reply cannot be taken back)",
                    hint="Use `no_reward` or `incorrect`",
                    code="dialogue_retry",
                ),
            )
        transcript_grader = None
        if spec.dialogue.transcript_grader is not None:
            config = spec.dialogue.transcript_grader
            try:
                transcript_grader = graders.for_config(config)(
                    config, GraderContext(base_dir=loaded.base_dir)
                )
            except EnvbuilderError as exc:
                problems += 1
                self._grader_failed(("dialogue", "transcript_grader"), exc, used, DIALOGUE_VARIABLES, fail)
            else:
                uses = field_uses_of(transcript_grader)
                self._grader_fields(("dialogue", "transcript_grader"), uses, used, DIALOGUE_VARIABLES)
        try:
            dialogue = Dialogue(spec.dialogue, loaded.base_dir, self._first_turn)
        except EnvbuilderError as exc:
            fail(("dialogue",), exc)
            return None, None
        used.update(dialogue.variables())
        if spec.dialogue.column is not None:
            used[("dialogue", "column")] = frozenset({spec.dialogue.column})
            self._named.add(("dialogue", "column"))
        return (None, None) if problems else (dialogue, transcript_grader)

    def _user(self, used: dict[Loc, frozenset[str]], fail: Fail) -> SimulatedUser | None:
        """The simulated user of ``user:``; a spec that cannot converse is reported."""
        spec = self.spec
        assert spec.user is not None
        bad = []
        if spec.dialogue is not None:
            bad.append(
                ("dialogue", "a spec has `dialogue:` (fixed turns) or `user:` (a simulated user), not both")
            )
        if spec.submit.max_attempts > 1:
            bad.append(
                ("submit", "a conversation with a simulated user ends once, so `max_attempts` must be 1")
            )
        if spec.submit.on_ungradeable == "retry":
            bad.append(
                ("submit", "`retry` is not available with a simulated user (the conversation is over)")
            )
        for where, message in bad:
            fail((where,), EnvbuilderError(message, hint="Remove the conflicting key", code="user_conflict"))
        try:
            user = SimulatedUser(spec.user, self.loaded.base_dir)
        except EnvbuilderError as exc:
            fail(("user",), exc)
            return None
        used[("user", "template" if spec.user.template is not None else "template_file")] = user.fields
        return None if bad else user

    def _first_turn(self, task: Task) -> str:
        """The first user turn of a dialogue as text: the prompt's last user message."""
        user = [m for m in self.messages(task) if m.role == "user"]
        blocks = user[-1].blocks if user else []
        return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))

    def _declared(self, key: str) -> bool:
        """Whether the spec has the top-level block ``key``, valid or not: a part that needs an
        invalid block is not reported again (the block's own problem names the cause)."""
        return getattr(self.spec, key, None) is not None or (key,) in self.loaded.positions.marks

    def _document(self, used: dict[Loc, frozenset[str]], fail: Fail) -> Document | None:
        """The spec's initial state document, read once (None without `state:`)."""
        state = self.spec.state
        if state is None:
            return None
        path = None
        if state.file is not None:
            # The same rule as the data files: a link (a linked `data/` folder) is followed, and
            # its target must lie inside a folder the spec may read (paths.check_inside).
            path = check_inside(self.loaded.base_dir / state.file, self.loaded.base_dir)
            if path is None:
                fail(
                    ("state", "file"),
                    EnvbuilderError(
                        f"the state file {state.file!r} is outside the spec's folder",
                        hint="Put the JSON file beside the spec, or let the operator allow its "
                        "folder (envbuilder serve --data-root DIR, or $ENVBUILDER_DATA_ROOTS)",
                        code="state_file",
                    ),
                )
                return None
        if state.field is not None:
            used[("state", "field")] = frozenset({state.field})
            self._named.add(("state", "field"))
        try:
            return Document.load(path, state.field)
        except EnvbuilderError as exc:
            fail(("state", "file"), exc)
            return None

    def _containers(self, fail: Fail) -> SessionContainers | None:
        """The session containers of the spec's `sandbox:` (made on first use, not here)."""
        spec = self.spec.sandbox
        if spec is None:
            return None
        try:
            return SessionContainers(spec, self.loaded.base_dir, environment=self.spec.name)
        except EnvbuilderError as exc:
            fail(("sandbox",), exc)
            return None

    def _tools(self, used: dict[Loc, frozenset[str]], fail: Fail) -> tuple[list[Tool], list[Tool]]:
        """Build the `tools:` of the spec and the simulated user's own (`user.tools`); every
        problem located in its block, and no name given twice across both."""
        names: dict[str, Loc] = {self.spec.submit.name: ("submit", "name")}
        agent = self._build_tools(self.spec.tools, ("tools",), names, used, fail)
        user_configs = self.spec.user.tools if self.spec.user is not None else []
        for i, config in enumerate(user_configs):
            if config.terminal:
                fail(
                    ("user", "tools", i, "terminal"),
                    EnvbuilderError(
                        "a user's tool cannot end the episode (only the conversation does)",
                        hint="Remove `terminal: true`",
                        code="user_tool_terminal",
                    ),
                )
        user = self._build_tools(user_configs, ("user", "tools"), names, used, fail)
        return agent, user

    def _build_tools(
        self,
        configs: list[Any],
        prefix: Loc,
        names: dict[str, Loc],
        used: dict[Loc, frozenset[str]],
        fail: Fail,
    ) -> list[Tool]:
        built: list[Tool] = []
        context = ToolContext(
            base_dir=self.loaded.base_dir,
            splits=self.splits,
            document=self.document,
            containers=self.containers,
        )
        stateless: list[tuple[Loc, str]] = []  # tools that need the state a spec does not declare
        for i, config in enumerate(configs):
            loc: Loc = (*prefix, i)
            if loc in self._refused_tools:
                continue  # its code may not run (reported in __init__)
            try:
                cls = tools.for_config(config)
                made = cls(config, context).expand()
            except EnvbuilderError as exc:
                if exc.code == "tool_needs_sandbox" and self._declared("sandbox"):
                    continue  # the `sandbox:` block is invalid: that problem is reported once
                fail((*loc, *exc.loc), exc)
                continue
            for tool in made:
                if tool.name in names:
                    fail(
                        (*loc, "name"),
                        EnvbuilderError(
                            f"two tools are named {tool.name!r} "
                            f"(the other is at {_dotted(names[tool.name])})",
                            hint="Give each tool a distinct `name`",
                            code="tool_name_taken",
                        ),
                    )
                    continue
                names[tool.name] = (*loc, "name")
                if config.input is not None:
                    missing = sorted(cls.reads_input - set(config.input))
                    if missing:
                        fail(
                            (*loc, "input"),
                            EnvbuilderError(
                                f"a {config.type} tool reads the parameter{'s' if len(missing) > 1 else ''} "
                                + ", ".join(map(repr, missing))
                                + ", which `input:` does not declare",
                                hint=f"Declare {', '.join(missing)} or leave out `input:` for the default",
                                code="tool_input_missing",
                            ),
                        )
                        continue
                if tool.uses_document and self.document is None:
                    if not self._declared("state"):  # else it could not be read: reported once
                        stateless.append(((*loc, "type"), str(config.type)))
                    continue
                used[(*loc, *tool.fields_at)] = tool.fields
                if tool.names_fields:
                    self._named.add((*loc, *tool.fields_at))
                if config.only_for is not None:
                    used[(*loc, "only_for")] = frozenset({config.only_for})
                    self._named.add((*loc, "only_for"))
                built.append(tool)
        if stateless:  # one cause, one problem: at the first tool, the others counted in it
            (where, kind), more = stateless[0], len(stateless) - 1
            others = f" (so do {more} more tool{'s' if more > 1 else ''})" if more else ""
            fail(
                where,
                EnvbuilderError(
                    f"a {kind} tool works on the episode's state{others}, and the spec declares no `state:`",
                    hint="Add `state: {file: db.json}` (or `field:`) to the spec",
                    code="tool_needs_state",
                ),
            )
        return built

    def _check_budgets(self) -> list[tuple[tuple[str | int, ...], EnvbuilderError]]:
        """Render the hardest tasks of each split to render (row 0, and the rows with the
        longest value of each field among a sample), so a template that runs out of its time or
        size budget is reported when the spec loads (``validate``, ``check``, ``serve``), not
        when the first agent asks for it."""
        assert self.prompter is not None
        for name, view in self.splits.items():
            for row in _longest_rows(view):
                try:
                    self.prompter.messages(view.task(row))
                except TemplateError as exc:
                    if exc.code == "template_budget":
                        problem = TemplateError(f"split {name!r} row {row}: {exc.message}", hint=exc.hint)
                        return [(("prompt",), problem)]
                except EnvbuilderError:
                    pass  # the data's own problems are reported where the data is checked
        return []

    # -- discovery -----------------------------------------------------------------------------

    def list_splits(self) -> list[Split]:
        return [Split(name=v.name, type=v.type) for v in self.splits.values()]  # type: ignore[arg-type]

    def evaluation_split(self) -> str:
        """The split to evaluate on when none is named (:func:`envbuilder.spec.evaluation_split`:
        a test split, else a validation split, else the first)."""
        chosen = evaluation_split((v.name, v.type) for v in self.splits.values())
        if chosen is None:
            raise TaskNotFound(f"environment {self.name!r} has no splits", code="invalid_split")
        return chosen

    def training_split(self) -> str | None:
        """The split to train on when none is named (:func:`envbuilder.spec.training_split`: a
        train split, else None)."""
        return training_split((v.name, v.type) for v in self.splits.values())

    def split(self, name: str) -> SplitView:
        try:
            return self.splits[name]
        except KeyError:
            raise TaskNotFound(f"unknown split {name!r}", code="invalid_split") from None

    def check_task(self, task: Task) -> None:
        """Raise DataError when ``task`` (a client's ``task_spec``) lacks a field the prompt or
        the grader reads, so that it is refused at ``/create`` rather than failing later."""
        missing = sorted(self.task_fields.difference(task))
        if missing:
            raise DataError(
                f"task_spec lacks the field{'s' if len(missing) > 1 else ''} "
                + ", ".join(repr(m) for m in missing),
                hint="Send a task as /task or /tasks return it",
                code="task_incomplete",
            )

    def public(self, task: Task) -> Task:
        """``task`` as clients see it: without the private fields."""
        if not self.private_fields:
            return task
        return {k: v for k, v in task.items() if k not in self.private_fields}

    def find_task(self, task_id: Any) -> Task | None:
        """The full task with the default id ``task_id`` (``<dataset split>-<row>``) in a split
        that serves its rows in order, else None. A client sending back a task it got from
        ``/task`` is graded against this row, private fields included."""
        if not isinstance(task_id, str) or "-" not in task_id:
            return None
        split, _, row = task_id.rpartition("-")
        if not (row.isascii() and row.isdigit()) or len(row) > MAX_ROW_DIGITS:
            return None  # (int() of client text: no other digits, no 4,301-digit numbers)
        i = int(row)
        for view in self.splits.values():
            if view.shaper.split != split or view.shaper.id_column is not None:
                continue
            if i < len(view) and view.index[i] == i:  # the view serves its rows in order
                at: int | None = i
            else:  # a slice of the rows (a generated split's `[1000:]`)
                at = position(view.index, i)
            if at is not None:
                task = view.task(at)
                if task.get("id") == task_id:
                    return task
        return None

    def summary(self) -> str:
        """``train 7,473 / test 1,319``."""
        return " / ".join(f"{v.name} {len(v):,}" for v in self.splits.values())

    # -- an episode ----------------------------------------------------------------------------

    def task_tools(self, task: Task) -> ListToolsOutput:
        """The tools of a session on ``task`` (``/task_tools``)."""
        return self.toolbox.task_listing_for(task)

    def is_blocking(self, name: str) -> bool:
        """Whether a call of tool ``name`` may wait on I/O (then it streams with keep-alive pings)."""
        return self.toolbox.blocking(name)

    @functools.cached_property
    def inline_prompt(self) -> bool:
        """Whether the prompt may render on the event loop (see ``Prompter.inline``)."""
        assert self.prompter is not None
        return self.prompter.inline

    def prompt(self, task: Task) -> list[ContentBlock]:
        assert self.prompter is not None
        return self.prompter.prompt(task)

    def messages(self, task: Task) -> list[Message]:
        """The task's prompt as a conversation (before any call)."""
        assert self.prompter is not None
        return self.prompter.messages(task)

    def conversation(self, episode: Episode) -> list[Message]:
        """The conversation so far: the prompt, then each call and its output (``/messages``)."""
        return self.toolbox.conversation(episode, self.messages(episode.task))

    def grade_counts(self) -> dict[str, int]:
        """Answers graded so far, by outcome: ``{"correct": n, "incorrect": n, "ungradeable": n}``."""
        assert self.submit is not None
        return self.submit.counts.as_dict()

    @property
    def evaluates_answers(self) -> bool:
        """Whether a grader of this environment runs answers as code (a reasoning-gym family's
        ``eval``): serving it needs confined workers (``processes.require_confinement``)."""
        tool = self.submit
        roots = [] if tool is None else [tool.grader, tool.transcript_grader]
        return any(g.evaluates_answers for root in roots if root is not None for g in root.walk())

    @property
    def cleanup(self) -> bool:
        """Whether ending a session has work to do (:meth:`end_session`)."""
        return self.toolbox.cleanup

    async def end_session(self, episode: Episode) -> None:
        """Let the tools release what this session's calls left behind (never raises)."""
        await self.toolbox.end_session(episode)

    async def aclose(self) -> None:
        """Release what grading and tools hold open (a judge's HTTP connections)."""
        if self.submit is not None:
            await self.submit.grader.aclose()
            if self.submit.transcript_grader is not None:
                await self.submit.transcript_grader.aclose()
        if hasattr(self, "toolbox"):
            await self.toolbox.aclose()
        containers = getattr(self, "containers", None)
        if containers is not None:
            await containers.aclose()

    async def call_tool(
        self, episode: Episode, name: str, tool_input: dict[str, Any]
    ) -> RunToolSuccess | RunToolError:
        return await self.toolbox.call(episode, name, tool_input)


BUDGET_SAMPLE = 256
"""Rows read from the start and spread over a split to find its longest values at load time."""
SAMPLE_BLOCKS = 2
"""Most blocks a random read decodes whole (Parquet row groups, before the row index) that the
sample may touch: spread over a 10-million-row file, 256 rows would decode all of its ~150
row groups (the whole file) before the server could start."""
MAX_ROW_DIGITS = 18
"""Digits of the longest row number a default task id (``test-42``) can hold."""


def _longest_rows(view: SplitView) -> list[int]:
    """Row 0, then for each field the sampled row where its value is longest (a render's cost
    grows with the values it reads): at most a few rows, read from a bounded sample."""
    total = len(view)
    if total == 0:
        return []
    step = max(1, total // BUDGET_SAMPLE)
    sample = sorted({*range(min(total, BUDGET_SAMPLE)), *range(0, total, step)})
    longest: dict[str, tuple[int, int]] = {}
    blocks: set[int] = set()
    for row in sample:
        block = view.table.read_block(view.index[row])
        if block is not None and block not in blocks:
            if len(blocks) >= SAMPLE_BLOCKS:
                continue
            blocks.add(block)
        try:
            task = view.task(row)
        except EnvbuilderError:
            continue
        for field, value in task.items():
            size = len(value) if isinstance(value, str | list | dict) else len(str(value))
            if size > longest.get(field, (-1, 0))[0]:
                longest[field] = (size, row)
    return list(dict.fromkeys([0, *(row for _, row in longest.values())]))


def _dotted(loc: Loc) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def load_environment(path: str | os.PathLike[str] | Path, *, trust_code: bool | None = None) -> Environment:
    """Load the spec at ``path`` and compile it; raises SpecError listing every problem.

    ``trust_code``: whether the spec's own code may run (see :class:`Environment`); by default
    only a spec in the user's own folders runs its ``function`` and ``mcp`` tools.
    """
    return Environment(load_spec(path), trust_code=trust_code)
