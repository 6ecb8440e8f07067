"""The ``math`` grader: mathematical equivalence of numeric and LaTeX answers, via ``math-verify``.

``math-verify`` (and the SymPy it brings) is the optional extra ``envbuilder[math]``; it is
imported when a spec uses this grader, so other specs never pay for it. Its own timeouts use
``signal.alarm`` (main thread only), so they are off and the check runs in a worker thread
under ``asyncio.wait_for`` instead: a slow simplification makes the answer ungradeable
without stalling the server.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any, Literal

from pydantic import Field

from envbuilder.graders._base import Grade, Grader, GraderConfig, GraderConfigError, GraderContext, Task
from envbuilder.templating import Template

INSTALL_HINT = "Install it with: pip install 'envbuilder[math]'"


class MathConfig(GraderConfig):
    """Correct when the answer is mathematically equal to the target (`\\frac{1}{2}` = 0.5)."""

    type: Literal["math"]
    target: str
    """Jinja template over the task giving the reference answer (LaTeX or plain), e.g.
    `{{ answer }}`; a bare expression is read as LaTeX math."""
    extract: Literal["latex_and_expr", "latex", "expr"] = "latex_and_expr"
    """What to look for in the response: LaTeX (`\\boxed{}` first, then `$...$`), plain
    expressions (`1/2`), or both."""
    float_rounding: int = Field(default=6, ge=0, le=15)
    """Decimal places numbers are rounded to before comparing."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds the check may take before the answer is ungradeable."""
    max_answer_chars: int = Field(default=20_000, ge=1)
    """Longer answers are ungradeable rather than parsed."""


def _import_math_verify() -> Any:
    try:
        return importlib.import_module("math_verify")
    except ImportError:
        raise GraderConfigError(
            "the `math` grader needs the math-verify package, which is not installed",
            loc=("type",),
            hint=INSTALL_HINT,
            code="grader_missing_dependency",
        ) from None


class MathGrader(Grader):
    Config = MathConfig
    config: MathConfig
    # SymPy may think for seconds: run the call streamed, with keep-alives.
    blocking = True

    def __init__(self, config: MathConfig, context: GraderContext):
        super().__init__(config, context)
        mv = self._mv = _import_math_verify()
        # Its "timeout is disabled" warning is for callers with no timeout; ours is wait_for.
        for module in ("parser", "grader"):
            sub = getattr(mv, module, None)
            if sub is not None and hasattr(sub, "TIMEOUT_WARNING_SHOWN"):
                sub.TIMEOUT_WARNING_SHOWN = True
        self._target = Template(config.target, name="grader.target", base_dir=context.base_dir)
        latex, expr = mv.LatexExtractionConfig(), mv.ExprExtractionConfig()
        self._pred_config = {"latex_and_expr": [latex, expr], "latex": [latex], "expr": [expr]}[
            config.extract
        ]
        self._gold_config = [latex, expr]

    @property
    def fields(self) -> frozenset[str]:
        return self._target.variables

    def target(self, task: Task) -> str:
        return self._target.render(task).strip()

    def _check(self, answer: str, target: str) -> tuple[bool | None, str | None]:
        """(equal, extracted); ``equal`` None when nothing could be parsed from the answer."""
        mv = self._mv
        gold_text = target if "$" in target or "\\boxed" in target else f"${target}$"
        gold = mv.parse(gold_text, extraction_config=self._gold_config, parsing_timeout=None)
        pred = mv.parse(answer, extraction_config=self._pred_config, parsing_timeout=None)
        if not pred:
            return None, None
        extracted = str(pred[-1])  # [parsed, matched text]: show what was read
        if not gold:
            return False, extracted
        equal = mv.verify(gold, pred, float_rounding=self.config.float_rounding, timeout_seconds=None)
        return bool(equal), extracted

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        cfg = self.config
        target = self.target(task)
        too_long = Grade.too_long(answer, cfg.max_answer_chars, "parse", target=target)
        if too_long is not None:
            return too_long
        try:
            equal, extracted = await asyncio.wait_for(
                asyncio.to_thread(self._check, answer, target), timeout=cfg.timeout
            )
        except TimeoutError:
            return Grade.ungradeable(f"checking the answer took over {cfg.timeout:g} s", target=target)
        if equal is None:
            return Grade.ungradeable("no mathematical answer could be found in the response", target=target)
        if equal:
            return Grade.correct("the answer is equivalent", extracted=extracted, target=target)
        return Grade.incorrect("the answer is not equivalent", extracted=extracted, target=target)
