"""The ``reasoning_gym`` grader: each task family's own ``score_answer``, partial credit kept.

The task's ``rg`` field (written by the ``reasoning_gym`` source) names the family, its config,
the seed and the item; the grader rebuilds that item with reasoning-gym and scores the answer
against it, so the gold answer and the family's metadata never travel with the task. The
family's checker is the package's code, and some checkers evaluate the answer (``countdown``
parses it with SymPy's ``parse_expr``, which is ``eval``: ``9**9**9**9`` is hours in one C call,
``__import__('os')…`` runs anything): it runs in a confined grading process
(:func:`envbuilder.isolation.processes.confined_pool`: bubblewrap, no network, a read-only view) killed
at ``timeout``, and a checker that fails or overruns
makes the answer ungradeable, never a silent 0. What a failing checker said stays out of the
reason (an answer that runs code could put anything there): only its exception's type is shown.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from envbuilder.data._reasoning_gym import declared
from envbuilder.errors import EnvbuilderError
from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderContext,
    Outcome,
    Task,
    build_grader,
    field_uses_of,
    graders,
    nested,
)
from envbuilder.graders._normalize import hedged_numbers
from envbuilder.isolation import processes
from envbuilder.plugins import PluginField

__all__ = ["ReasoningGymGrader", "ReasoningGymGraderConfig"]

NestedGrader = Annotated[GraderConfig, PluginField(graders)]

_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
#: Longer answers are not scored (a checker's work grows with the answer).
MAX_ANSWER_CHARS = 20_000


class ReasoningGymGraderConfig(GraderConfig):
    """Score answers with the task family's own checker (reasoning-gym's `score_answer`),
    keeping its partial credit."""

    model_config = ConfigDict(defer_build=True)

    type: Literal["reasoning_gym"]
    extract: Literal["auto", "answer_tag", "none"] = "auto"
    """`auto`: the last `<answer>…</answer>` of the response when it has one, else the whole
    response; `answer_tag`: only the tag's content (without one the answer is ungradeable);
    `none`: the whole response."""
    otherwise: NestedGrader | None = None
    """The grader of tasks that reasoning-gym did not generate (a mixture's rows from files);
    without it their answers are ungradeable."""
    timeout: float = Field(default=10.0, gt=0, le=120)
    """Seconds a family's checker may take before the answer is ungradeable."""
    partial_credit: bool = True
    """Pay the family checker's partial credit (a score between 0 and 1). `false`: only full
    marks earn reward. Several checkers pay answers that are not right: the default one gives
    `len(gold) / len(answer)` to any answer that merely contains the gold answer (another task's
    `11` for a gold `1` earns 0.5), and `spell_backward` pays each letter in place (a random
    string earns about 1/26 a letter), so a policy trained on them learns to spray."""


def extract_answer(response: str, mode: str) -> str | None:
    """The answer reasoning-gym scores, or None when ``answer_tag`` finds no tag."""
    if mode != "none":
        tags = _TAG.findall(response)
        if tags:
            return str(tags[-1]).strip()
        if mode == "answer_tag":
            return None
    return response.strip()


@processes.worker_function
def _score(coordinates: dict[str, Any], answer: str) -> float:
    """Run in a fresh confined process: the family's checker on ``answer``, the guard armed
    first (the item is rebuilt before: its generation is the package's code, not the answer)."""
    from envbuilder.data._reasoning_gym import family_dataset, rg_entry

    dataset = family_dataset(coordinates["family"], coordinates["config"], int(coordinates["seed"]))
    entry = rg_entry(coordinates)
    return float(processes.guarded(dataset.score_answer, answer, entry))


@processes.worker_function
def _build(family: str, config: dict[str, Any]) -> bool:
    """Run in a zygote (a served spec's family config only): build the family's dataset and
    score its first item's own answer, so that every child of it starts with the dataset built
    (some take half a second) and the checker's lazy imports done."""
    from envbuilder.data._reasoning_gym import family_dataset

    dataset = family_dataset(family, config, 0)
    entry = dataset[0]
    dataset.score_answer(entry["answer"], entry)
    return True


class ReasoningGymGrader(Grader):
    Config = ReasoningGymGraderConfig
    config: ReasoningGymGraderConfig
    blocking = True
    evaluates_answers = True

    def __init__(self, config: ReasoningGymGraderConfig, context: GraderContext):
        super().__init__(config, context)
        self.otherwise: Grader | None = None
        if config.otherwise is not None:
            try:
                self.otherwise = build_grader(config.otherwise, context)
            except EnvbuilderError as exc:
                raise nested(("otherwise",), exc) from None

    def walk(self) -> list[Grader]:
        return [self, *(self.otherwise.walk() if self.otherwise else [])]

    def field_uses(self) -> list[FieldUse]:
        # `answer` too: only the grader reads it, so by default clients never see it.
        own = FieldUse((), frozenset({"rg", "answer"}))
        return [
            own,
            *(u.under(("otherwise",)) for u in (field_uses_of(self.otherwise) if self.otherwise else [])),
        ]

    def target(self, task: Task) -> Any:
        if isinstance(task.get("rg"), dict):
            return task.get("answer")
        return self.otherwise.target(task) if self.otherwise else None

    def gold(self, task: Task) -> str | None:
        if isinstance(task.get("rg"), dict):
            return super().gold(task)
        return self.otherwise.gold(task) if self.otherwise else None

    def missing_target(self, task: Task) -> str | None:
        if isinstance(task.get("rg"), dict):
            return None
        if self.otherwise is not None:
            return self.otherwise.missing_target(task)
        return "the task was not generated by reasoning-gym and the grader has no `otherwise:`"

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        coordinates = task.get("rg")
        if not isinstance(coordinates, dict):
            if self.otherwise is not None:
                return await self.otherwise.grade(answer, task, secrets)
            return Grade.ungradeable("the task was not generated by reasoning-gym (no `rg` field)")
        long = Grade.too_long(answer, MAX_ANSWER_CHARS, "score")
        if long is not None:
            return long
        extracted = extract_answer(answer, self.config.extract)
        family = str(coordinates.get("family"))
        if extracted is None:
            return Grade.ungradeable("no <answer>…</answer> in the response", family=family)
        hedge = hedged_numbers(extracted)
        if hedge:
            # Several different final answers at once: partial-credit checkers (string
            # similarity, closeness) would pay for the spray, so it is graded as no answer.
            return Grade.incorrect(
                f"several different final answers ({', '.join(hedge[:4])}): a hedge is not an answer",
                family=family,
            )
        config = coordinates.get("config")
        # Only a config a served spec declares is built in the (never exposed) zygote; a
        # client's task with a config of its own is built in its answer's process.
        prepare = [(_build, family, config)] if declared(family, config) else []
        try:
            score = await processes.run_confined(
                _score, coordinates, extracted, timeout=self.config.timeout, prepare=prepare
            )
        except processes.CheckTimeout:
            return Grade.ungradeable(
                f"the {family} checker took more than {self.config.timeout:g} s", family=family
            )
        except processes.CodeRefused as exc:
            return Grade.ungradeable(
                f"the answer tried to run code in the {family} checker ({exc.what}), which was refused",
                family=family,
            )
        except processes.WorkerError as exc:  # the family's checker is the package's code
            return Grade.failed(f"the {family} checker failed: {exc.kind}", family=family)
        except processes.WorkerFailed as exc:
            return Grade.failed(f"the {family} checker stopped: {exc}", family=family)
        except EnvbuilderError as exc:  # no sandbox here (serve refuses to start without one)
            return Grade.failed(exc.message, family=family)
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            # Out of contract (a float sum a hair above 1 included): never rounded into full credit.
            return Grade.ungradeable(
                f"the {family} checker gave a score outside [0, 1] ({score!r})", family=family
            )
        details = {"extracted": extracted, "family": family}
        if score >= 1.0:
            return Grade.correct("", **details)
        if score <= 0.0:
            return Grade.incorrect("", **details)
        if not self.config.partial_credit:
            return Grade.incorrect(
                f"the {family} checker's partial credit ({score:.2f}) is not paid (partial_credit: false)",
                family_score=score,
                **details,
            )
        return Grade(Outcome.CORRECT, score, f"partial credit {score:.2f}", details)

    async def aclose(self) -> None:
        if self.otherwise is not None:
            await self.otherwise.aclose()
