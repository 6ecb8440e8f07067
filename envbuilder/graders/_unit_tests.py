"""The ``unit_tests`` grader: run the answer's code against the task's tests in the sandbox.

A Jinja template over the task and the answer's code makes the program; a command runs it in
the sandbox (:mod:`envbuilder.isolation.sandbox`), and the exit status decides: 0 passes. Layouts:

HumanEval (``prompt``, ``test``, ``entry_point``; the answer completes the function or
rewrites it whole)::

    program: "{{ prompt }}{{ answer }}\\n\\n{{ test }}\\n\\ncheck({{ entry_point }})\\n"

MBPP (``test_list``, ``test_setup_code``), all asserts at once, or one run per assert for a
fraction of credit::

    program: "{{ answer }}\\n\\n{{ test_setup_code }}\\n{% for t in test_list %}{{ t }}\\n{% endfor %}"
    # or
    cases: test_list
    program: "{{ answer }}\\n\\n{{ test_setup_code }}\\n{{ case }}\\n"
    score: fraction

A crash, a timeout, a syntax error or a limit is a graded 0 whose reason says which; a
sandbox that cannot run anything (engine missing or broken) makes the answer ungradeable.

With ``harness:`` (Python functions, e.g. HumanEval) the exit status alone never passes: the
answer's code and the hidden tests run in two processes (:mod:`._harness_main`), the tests call
the answer's function through a proxy that lets only built-in values back (so an object whose
``__eq__`` always says True cannot pass), and a run passes only when the harness prints the
run's secret nonce after the tests returned. ``os._exit(0)``, ``sys.exit(0)``, killing the
harness, or reading and rewriting the test file (deleted before the answer's code starts) all
fail. The program's output, which may quote the tests, is kept out of the grade's details an
agent sees before its episode ends (see :data:`envbuilder.episode.GOLD_DETAILS`)::

    program: "{{ prompt }}{{ answer }}\n"
    harness:
      entry_point: "{{ entry_point }}"
      tests: "{{ prompt }}\n{{ test }}"
      call: "check({{ entry_point }})"
"""

from __future__ import annotations

import asyncio
import json
import secrets
from importlib import resources
from typing import Any, Literal

from pydantic import Field, model_validator

from envbuilder import deadlines
from envbuilder.errors import SandboxError, TemplateError
from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderContext,
    Outcome,
    Task,
    grader_template,
)
from envbuilder.graders._code import extract_code
from envbuilder.graders._harness_main import KILLED, MEMORY
from envbuilder.isolation.sandbox import Limits, RunResult, default_backend, run_code
from envbuilder.plugins import ConfigModel
from envbuilder.templating import Template

#: Names the program template gets besides the task's fields (these win on a clash).
PROGRAM_VARIABLES = frozenset({"answer", "case", "task"})
#: The harness's own files in the sandbox's working folder (``harness:``).
HARNESS_FILES = ("main.py", "solution.py", "tests.py", "nonce.txt")
#: The prefix of the harness's line on stderr that says why a run failed.
HARNESS_PREFIX = "envbuilder-harness:"


class PythonHarness(ConfigModel):
    """Run hidden tests against one Python function of the answer, in a separate process."""

    entry_point: str
    """Jinja template giving the name of the function the tests call, e.g. `{{ entry_point }}`;
    the tests see it under that name and as `candidate`."""
    tests: str
    """Jinja template of the hidden test code (never in the answer's process), e.g.
    `{{ prompt }}\n{{ test }}` (the prompt brings helpers some tests use)."""
    call: str | None = None
    """Jinja template of the statement that runs the tests once defined, e.g.
    `check({{ entry_point }})`; none when the test code runs them itself (top-level asserts)."""


class UnitTestsConfig(GraderConfig):
    """Run the answer's code with the task's tests in a sandbox; passing earns the reward."""

    type: Literal["unit_tests"]
    program: str | None = None
    """Jinja template of the program run: the task's fields, `answer` (the code found in the
    answer) and, with `cases`, `case`. E.g. HumanEval's
    `{{ prompt }}{{ answer }}\\n{{ test }}\\ncheck({{ entry_point }})`."""
    program_file: str | None = None
    """The program template in a file beside the spec, instead of `program`."""
    file: str = "main.py"
    """The name the program is written under in the sandbox's working folder."""
    command: list[str] = Field(default_factory=lambda: ["python3", "-I", "main.py"], min_length=1)
    """The command that runs it, in the working folder (any language the sandbox has)."""
    extract: Literal["auto", "fenced", "raw"] = "auto"
    """`auto`: the first fenced code block of `languages` (or untagged) when there is one,
    else the whole answer; `fenced`: a block is required; `raw`: the answer as it is."""
    languages: list[str] = Field(default_factory=lambda: ["python", "py", "python3"])
    """Fence tags taken as code, e.g. ```` ```python ````."""
    cases: str | None = None
    """A task field holding a list of separable tests (e.g. MBPP's `test_list`): one run per
    test, each with that test as `case`."""
    score: Literal["all", "fraction"] = "all"
    """`all`: 1 when every run passes, else 0; `fraction`: the share of `cases` that pass."""
    max_cases: int = Field(default=64, ge=1, le=1000)
    """Tasks with more `cases` are ungradeable (each is a run)."""
    reference: str | None = None
    """Jinja template over the task giving a correct answer, e.g. `{{ canonical_solution }}`
    (for `envbuilder check` and previews)."""
    limits: Limits = Field(default_factory=Limits)
    """What each run may use."""
    backend: Literal["bubblewrap", "docker"] | None = None
    """The sandbox; default `$ENVBUILDER_SANDBOX`, else `bubblewrap`. Usually the operator's
    choice, so best left unset."""
    max_answer_chars: int = Field(default=50_000, ge=1)
    """Longer answers are ungradeable rather than run."""
    harness: PythonHarness | None = None
    """Python functions only: `program` becomes the answer's module (e.g.
    `{{ prompt }}{{ answer }}`) and these hidden tests call its function from another process;
    a pass needs the tests to have returned (a secret printed after them), not an exit status,
    and only built-in values returned (no always-equal objects). `command` and `file` are then
    the harness's own."""

    @model_validator(mode="after")
    def _consistent(self) -> UnitTestsConfig:
        if (self.program is None) == (self.program_file is None):
            raise ValueError("give one of `program` or `program_file`")
        if self.harness is not None and self.cases is not None:
            raise ValueError("`harness` runs one test module: it cannot be combined with `cases`")
        if self.score == "fraction" and self.cases is None:
            raise ValueError("`score: fraction` needs `cases` (the task field listing separate tests)")
        return self


class UnitTestsGrader(Grader):
    Config = UnitTestsConfig
    config: UnitTestsConfig
    # A run takes from tens of milliseconds to its wall limit: stream with keep-alives.
    blocking = True
    # The target is the reference solution; a grade runs the answer against the tests instead.
    compares_target = False

    def __init__(self, config: UnitTestsConfig, context: GraderContext):
        super().__init__(config, context)
        # The config requires one of `program` and `program_file`.
        self._program_at = ("program",) if config.program is not None else ("program_file",)
        source = config.program if config.program is not None else config.program_file
        assert source is not None
        self._program = grader_template(
            source, key=self._program_at, context=context, from_file=config.program is None
        )
        self._reference = (
            grader_template(config.reference, key=("reference",), context=context)
            if config.reference
            else None
        )
        # Checked here, so a bad backend name fails when the spec loads, not on each answer.
        self._backend = default_backend(config.backend)
        self._harness: dict[str, Template] = {}
        if config.harness is not None:
            for key in ("entry_point", "tests", "call"):
                text = getattr(config.harness, key)
                if text is not None:
                    self._harness[key] = grader_template(text, key=("harness", key), context=context)

    def field_uses(self) -> list[FieldUse]:
        uses = [FieldUse(self._program_at, self._program.variables - PROGRAM_VARIABLES)]
        for key, template in self._harness.items():
            uses.append(FieldUse(("harness", key), template.variables - PROGRAM_VARIABLES))
        if self.config.cases:
            uses.append(FieldUse(("cases",), frozenset({self.config.cases}), named=True))
        if self._reference is not None:
            uses.append(FieldUse(("reference",), self._reference.variables))
        return uses

    def target(self, task: Task) -> str | None:
        return self._reference.render(task) if self._reference else None

    def rendered(self, task: Task, answer: str) -> dict[str, str]:
        """The program and the harness's parts rendered for ``task`` with ``answer`` as the
        code (for exports that run them elsewhere): ``program``, and ``entry_point``, ``tests``
        and ``call`` when the grader has a harness."""
        out = {"program": self._program.render({**task, "task": task, "answer": answer})}
        for key, template in self._harness.items():
            out[key] = template.render({**task, "task": task})
        return out

    def code(self, answer: str) -> str | None:
        """The code in ``answer`` (None when the answer holds none where it must)."""
        cfg = self.config
        if cfg.extract == "raw":
            return answer
        return extract_code(answer, cfg.languages, require_fence=cfg.extract == "fenced")

    def programs(self, code: str, task: Task) -> list[str]:
        """The program(s) to run: one, or one per case."""
        context = {**task, "task": task, "answer": code}
        if self.config.cases is None:
            return [self._program.render(context)]
        cases = task.get(self.config.cases)
        if not isinstance(cases, list | tuple):
            raise TemplateError(f"grader.cases: the task field {self.config.cases!r} is not a list")
        return self._program.render_each([{**context, "case": case} for case in cases])

    async def _run(self, program: str, key: object) -> RunResult:
        cfg = self.config
        return await run_code(
            cfg.command, {cfg.file: program.encode()}, cfg.limits, backend=self._backend, key=key
        )

    async def _run_harness(self, program: str, task: Task) -> Grade:
        """One run of the Python harness; passes only when it printed the nonce."""
        context = {**task, "task": task}

        def render() -> dict[str, str]:
            return {key: template.render(context) for key, template in self._harness.items()}

        slow = any(not t.bounded for t in self._harness.values())
        parts = await deadlines.offload(render) if slow else render()
        nonce = secrets.token_hex(16)
        files = {
            "main.py": resources.files(__package__).joinpath("_harness_main.py").read_bytes(),
            "solution.py": program.encode(),
            "tests.py": parts["tests"].encode(),
            "nonce.txt": nonce.encode(),
        }
        argument = json.dumps({"entry_point": parts["entry_point"].strip(), "call": parts.get("call", "")})
        result = await run_code(
            ["python3", "-I", "main.py", argument],
            files,
            self.config.limits,
            backend=self._backend,
            key=deadlines.current_party(),  # the session's runs take turns with other sessions'
        )
        own = f"{HARNESS_PREFIX}{nonce}:"  # only the harness knows the nonce: the answer cannot write this
        reached_end = f"{own} passed" in result.stdout.splitlines()
        # The nonce is this run's secret: it never leaves the grader.
        shown = result.to_dict()
        for stream in ("stdout", "stderr"):
            shown[stream] = str(shown[stream]).replace(own, HARNESS_PREFIX)
        details: dict[str, Any] = {"passed": int(result.ok and reached_end), "total": 1, "run": shown}
        if result.ok and reached_end:
            return Grade(Outcome.CORRECT, 1.0, "the tests passed", details)
        said = [line for line in result.stderr.splitlines() if line.startswith(own)]
        if said and result.exit_code == 3:
            return Grade.ungradeable(said[-1].removeprefix(own).strip(), **details)
        if said:
            reason = said[-1].removeprefix(own).strip()
            if result.oom_killed and reason == KILLED.format("SIGKILL"):
                # The memory cgroup's OOM killer took the answer's process (the container's
                # set-up counts its kills, which the code cannot write).
                reason = MEMORY
        elif result.ok:
            reason = "the program exited before the tests finished (exit status 0 is not a pass)"
        else:
            reason = result.describe()
        return Grade(Outcome.INCORRECT, 0.0, reason, details)

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        cfg = self.config
        too_long = Grade.too_long(answer, cfg.max_answer_chars, "run")
        if too_long is not None:
            return too_long
        code = self.code(answer)
        if code is None:
            return Grade.ungradeable(f"no code block ({', '.join(cfg.languages)}) was found in the answer")
        try:
            programs = (
                self.programs(code, task)
                if self._program.bounded
                else await deadlines.offload(self.programs, code, task)
            )
        except TemplateError as exc:
            return Grade.ungradeable(f"the program could not be built: {exc}")
        if not programs:
            return Grade.ungradeable("the task has no tests to run")
        if len(programs) > cfg.max_cases:
            return Grade.ungradeable(f"the task has {len(programs)} tests; at most {cfg.max_cases} are run")
        if self._harness:
            try:
                return await self._run_harness(programs[0], task)
            except TemplateError as exc:
                return Grade.ungradeable(f"the tests could not be built: {exc}")
            except SandboxError as exc:
                return Grade.failed(f"the sandbox could not run the code: {exc}", sandbox=self._backend.name)
        # The session's runs take turns with other sessions' (one grade's cases as one party).
        key = deadlines.current_party() or (object() if len(programs) > 1 else None)
        try:
            results = await asyncio.gather(*(self._run(p, key) for p in programs))
        except SandboxError as exc:
            return Grade.failed(f"the sandbox could not run the code: {exc}", sandbox=self._backend.name)
        return _score(results, cfg.score)


def _score(results: list[RunResult], mode: str) -> Grade:
    passed = sum(r.ok for r in results)
    failed = [r for r in results if not r.ok]
    details: dict[str, Any] = {"passed": passed, "total": len(results)}
    if len(results) == 1:
        details["run"] = results[0].to_dict()
    else:
        details["runs"] = [r.to_dict(tail=500) for r in results]
    if not failed:
        reason = "the tests passed" if len(results) == 1 else f"all {len(results)} tests passed"
        return Grade(Outcome.CORRECT, 1.0, reason, details)
    first = failed[0].describe()
    if mode == "fraction":
        score = passed / len(results)
        outcome = Outcome.CORRECT if score > 0 else Outcome.INCORRECT
        reason = f"{passed} of {len(results)} tests passed; first failure: {first}"
        return Grade(outcome, score, reason, details)
    return Grade(Outcome.INCORRECT, 0.0, first, details)
