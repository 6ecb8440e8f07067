"""The ``llm_judge`` grader: ask a model behind any OpenAI-compatible chat-completions endpoint.

The API key is read per call from the session's secrets or from an environment variable the
spec names; it is only ever put in the ``Authorization`` header, never in a log line, an
error or a grade. Failures (unreachable, refused, unparseable) are ungradeable, never 0.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from envbuilder import deadlines
from envbuilder.errors import Loc
from envbuilder.graders import _safe_regex
from envbuilder.graders._base import (
    FieldUse,
    Grade,
    Grader,
    GraderConfig,
    GraderContext,
    Outcome,
    Task,
    grader_template,
    render_target,
    why_target_missing,
)
from envbuilder.llm import (
    ChatModel,
    ModelError,
    ReplyCache,
    Usage,
    cache_key,
    chat_body,
    open_cache,
    reply_text,
    resolve_api_key,
)
from envbuilder.plugins import ConfigModel
from envbuilder.retry import RetryPolicy
from envbuilder.spec import api_root
from envbuilder.templating import Template

if TYPE_CHECKING:
    import httpx

#: Names the judge templates get besides the task's own fields (these win on a clash).
JUDGE_VARIABLES = frozenset({"response", "question", "reference", "criteria", "task"})
_LABEL_PATTERN = r"(?i)\b(?:verdict|grade)\s*[:=]\s*[\*\"'`\[]*\s*([A-Za-z_]+)"
_SCORE_PATTERN = r"(?i)\bscore\s*[:=]\s*[\*\"'`\[]*\s*(-?\d+(?:\.\d+)?)"
_REASONING_CHARS = 4000


class VerdictSpec(ConfigModel):
    """How the judge's reply becomes a score: grade labels, or a number in a range."""

    labels: dict[str, float] | None = None
    """Grade labels and their scores in [0, 1], e.g. `{CORRECT: 1, PARTIAL: 0.5, INCORRECT: 0}`
    (matched case-insensitively). The default when `score_range` is not given."""
    score_range: tuple[float, float] | None = None
    """Read a number instead, e.g. `[0, 10]`, normalised to [0, 1]."""
    pattern: str | None = None
    """Regex whose group 1 holds the label or number; the last match counts. Default: a
    `VERDICT: <label>` (or `GRADE:`) line, or a `SCORE: <number>` line."""

    _check = field_validator("pattern")(lambda v: v if v is None else _safe_regex.check_pattern(v))

    @model_validator(mode="after")
    def _one_kind(self) -> VerdictSpec:
        if self.labels is not None and self.score_range is not None:
            raise ValueError("give `labels` or `score_range`, not both")
        if self.labels is not None and any(not 0 <= s <= 1 for s in self.labels.values()):
            raise ValueError("label scores must be in [0, 1]")
        if self.score_range is not None and self.score_range[0] >= self.score_range[1]:
            raise ValueError("score_range must be [low, high] with low < high")
        return self


class LLMJudgeConfig(GraderConfig):
    """Ask an LLM whether the answer is right, through an OpenAI-compatible endpoint."""

    type: Literal["llm_judge"]
    base_url: str
    """The API root, ending before `/chat/completions`, e.g. `https://api.openai.com/v1`."""
    model: str
    """The judge model's name at that endpoint."""
    template_file: str | None = None
    """The judge prompt: a file beside the spec or a shipped one, `judges/correctness.jinja`
    (reference-based, the default) or `judges/rubric.jinja` (criteria, a 0-10 score). It sees
    the task's fields and `response`, `question`, `reference`, `criteria`, `task`."""
    template: str | None = None
    """An inline judge prompt instead of `template_file`."""
    system: str | None = None
    """An optional system message (a Jinja template like the prompt)."""
    question: str | None = None
    """Jinja template over the task giving the question, e.g. `{{ question }}`."""
    reference: str | None = None
    """Jinja template over the task giving the reference answer, e.g. `{{ answer }}`."""
    criteria: list[str] = Field(default_factory=list)
    """Rubric criteria, for templates that list them."""
    verdict: VerdictSpec = Field(default_factory=VerdictSpec)
    """How the reply is turned into a score."""
    api_key_secret: str | None = "OPENAI_API_KEY"
    """The name of the session secret holding the API key (sent by the client)."""
    api_key_env: str | None = None
    """An environment variable of the server holding the API key, used when the session has
    no such secret. The key itself never goes in the spec."""
    temperature: float = Field(default=0.0, ge=0, le=2)
    """Sampling temperature (0: the most repeatable verdicts)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Cap on the reply's length (omitted from the request when unset)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """More request fields for the endpoint, e.g. `{reasoning_effort: low}`."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds to wait for one reply."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """Retries after a 429, a 5xx, a timeout or a dropped connection."""
    backoff: float = Field(default=0.5, ge=0)
    """Seconds before the first retry; doubled each time (with jitter)."""
    max_retry_after: float = Field(default=30.0, ge=0)
    """The longest `Retry-After` the judge may ask for that is honoured (longer is cut)."""
    max_concurrency: int = Field(default=32, ge=1)
    """Judge calls in flight at once (more wait their turn)."""
    cache: bool = True
    """Keep replies that state a verdict in the on-disk cache (`$ENVBUILDER_CACHE_DIR`);
    a reply stating none is never cached, so the judge is asked again."""
    max_answer_chars: int = Field(default=20_000, ge=1)
    """Longer answers are ungradeable rather than sent."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return api_root(value)

    @model_validator(mode="after")
    def _one_template(self) -> LLMJudgeConfig:
        if self.template is not None and self.template_file is not None:
            raise ValueError("give `template` or `template_file`, not both")
        return self


@dataclass
class JudgeStats:
    """Counters of one judge grader: what grading cost."""

    usage: Usage = field(default_factory=Usage)
    """The judge model's calls, retries and tokens (every event loop's together)."""
    cache_hits: int = 0
    failures: int = 0
    """Grades that ended ungradeable because the judge could not be used."""

    @property
    def calls(self) -> int:
        """HTTP requests sent (retries included)."""
        return self.usage.calls

    @property
    def retries(self) -> int:
        return self.usage.retries


class JudgeUnavailable(Exception):
    """The judge could not be used; the message is safe to show (no key, no reply body)."""


@dataclass
class _LoopState:
    model: ChatModel
    semaphore: asyncio.Semaphore
    inflight: dict[str, asyncio.Future[str]]


class LLMJudgeGrader(Grader):
    Config = LLMJudgeConfig
    config: LLMJudgeConfig
    blocking = True

    def __init__(self, config: LLMJudgeConfig, context: GraderContext):
        super().__init__(config, context)
        if config.template is not None:
            self._prompt_at: Loc = ("template",)
            self._prompt = grader_template(config.template, key=self._prompt_at, context=context)
        else:
            self._prompt_at = ("template_file",) if config.template_file is not None else ()
            self._prompt = grader_template(
                config.template_file or "judges/correctness.jinja",
                key=self._prompt_at or ("template_file",),
                context=context,
                from_file=True,
            )

        def optional(key: str) -> Template | None:
            source = getattr(config, key)
            return grader_template(source, key=(key,), context=context) if source else None

        self._system = optional("system")
        self._question = optional("question")
        self._reference = optional("reference")
        verdict = config.verdict
        self._numeric = verdict.score_range is not None
        self._labels = {
            k.upper(): v for k, v in (verdict.labels or {"CORRECT": 1.0, "INCORRECT": 0.0}).items()
        }
        self._pattern = _safe_regex.compile_pattern(
            verdict.pattern or (_SCORE_PATTERN if self._numeric else _LABEL_PATTERN)
        )
        self._cache: ReplyCache | None = open_cache() if config.cache else None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self.stats = JudgeStats()
        # A chat completion has no side effects, so a 500 is worth another try too.
        self._retry = RetryPolicy(
            max_retries=config.max_retries,
            backoff=config.backoff,
            max_retry_after=config.max_retry_after,
            repeat_safe=True,
        )

    def field_uses(self) -> list[FieldUse]:
        # The judge's own templates get its variables (the answer, …) besides the task's fields.
        uses = [FieldUse(self._prompt_at, self._prompt.variables - JUDGE_VARIABLES)]
        if self._system is not None:
            uses.append(FieldUse(("system",), self._system.variables - JUDGE_VARIABLES))
        for key, template in (("question", self._question), ("reference", self._reference)):
            if template is not None:
                uses.append(FieldUse((key,), template.variables))
        return uses

    def target_templates(self) -> list[Template]:
        return [] if self._reference is None else [self._reference]

    def target(self, task: Task) -> str | None:
        if self._reference is None or self.missing_target(task) is not None:
            return None
        return render_target(self._reference, task, allow_empty=True).strip()

    def missing_target(self, task: Task) -> str | None:
        # A judge needs no reference (an empty one is fine), but a null field is not "None".
        return why_target_missing([self._reference], task, allow_empty=True) if self._reference else None

    # -- the request ---------------------------------------------------------------------------

    def messages(self, answer: str, task: Task) -> list[dict[str, str]]:
        """The chat messages sent to the judge for ``answer``."""
        context = {
            **task,
            "task": task,
            "response": answer,
            "question": self._question.render(task) if self._question else task.get("question"),
            "reference": self.target(task),
            "criteria": list(self.config.criteria),
        }
        out = []
        if self._system is not None:
            out.append({"role": "system", "content": self._system.render(context)})
        out.append({"role": "user", "content": self._prompt.render(context)})
        return out

    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        cfg = self.config
        return chat_body(cfg.model, messages, cfg.temperature, cfg.max_tokens, cfg.extra_body)

    def _api_key(self, secrets: dict[str, str]) -> str | None:
        return resolve_api_key(self.config.api_key_secret, self.config.api_key_env, secrets)

    def _state(self) -> _LoopState:
        # A client and a semaphore belong to one event loop; tests and tools may run several.
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            cfg = self.config
            model = ChatModel(
                cfg.base_url,
                cfg.model,
                retry=self._retry,
                timeout=cfg.timeout,
                max_connections=cfg.max_concurrency,
                trust_env=False,
                usage=self.stats.usage,
            )
            state = _LoopState(model, asyncio.Semaphore(cfg.max_concurrency), {})
            self._loops[loop] = state
        return state

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        state = self._loops.pop(loop, None)
        if state is not None:
            await state.model.aclose()

    async def reply(self, answer: str, task: Task, secrets: dict[str, str]) -> tuple[str, bool]:
        """The judge's reply text for ``answer`` and whether it came from the cache.

        Raises:
            JudgeUnavailable: the judge could not be reached, refused, or sent no reply.
        """
        slow = any(t is not None and not t.bounded for t in (self._system, self._prompt, self._question))
        # A rubric that does more than show fields renders under its deadline, off the loop.
        messages = (
            await deadlines.offload(self.messages, answer, task) if slow else self.messages(answer, task)
        )
        payload = self._payload(messages)
        key = cache_key({"base_url": self.config.base_url, **payload})
        if self._cache is not None:
            cached = await self._cache.get(key)
            # Only verdicts are cached; an entry that states none (an older cache) is a miss.
            if cached is not None and self.verdict(cached) is not None:
                self.stats.cache_hits += 1
                return cached, True
        state = self._state()
        pending = state.inflight.get(key)
        if pending is not None:  # the same prompt is being judged right now: share its reply
            self.stats.cache_hits += 1
            return await asyncio.shield(pending), True
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        state.inflight[key] = fut
        try:
            async with state.semaphore:
                text = await self._ask(state.model, payload, self._api_key(secrets))
            # A reply stating no verdict is not cached: the judge is asked again next time.
            if self._cache is not None and self.verdict(text) is not None:
                await self._cache.put(key, text)
            fut.set_result(text)
            return text, False
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it; no "never retrieved" warning
            raise
        finally:
            del state.inflight[key]

    async def _ask(self, model: ChatModel, payload: dict[str, Any], key: str | None) -> str:
        """The judge's reply text to ``payload``, or JudgeUnavailable in the judge's words."""
        try:
            response = await model.post("/chat/completions", payload, api_key=key, describe=self._problem)
        except ModelError as exc:
            if exc.gave_up:
                raise JudgeUnavailable(f"the judge is unavailable: {exc.message}") from None
            hint = " (check the API key)" if exc.reason in ("HTTP 401", "HTTP 403") else ""
            raise JudgeUnavailable(f"the judge refused the request: {exc.message}{hint}") from None
        try:
            text = reply_text(response.json())
        except ValueError:
            text = None
        if text is None:
            raise JudgeUnavailable("the judge's reply is not a chat completion")
        if not text.strip():
            raise JudgeUnavailable("the judge's reply is empty")
        return text

    def _problem(self, reason: str, response: httpx.Response | None) -> str:
        # The judge's wording of one failed try: the status or the transport failure, no body.
        return f"no reply within {self.config.timeout:g} s" if reason.startswith("timeout") else reason

    # -- the verdict ---------------------------------------------------------------------------

    def verdict(self, text: str) -> tuple[str | float, float] | None:
        """(verdict as read, score in [0, 1]) from the reply text; None when unparseable."""
        try:
            matches = _safe_regex.find_all(self._pattern, text[-_REASONING_CHARS * 4 :])
        except _safe_regex.PatternTimeout:
            return None
        if self._numeric:
            low, high = self.config.verdict.score_range or (0.0, 1.0)
            for m in reversed(matches):
                try:
                    value = float(m.group(1))
                except (IndexError, ValueError):
                    continue
                if low <= value <= high:
                    return value, (value - low) / (high - low)
            return None
        candidates = [m.group(1) for m in reversed(matches) if m.lastindex]
        # A reply that is only the label ("CORRECT") needs no pattern.
        candidates.append(text.strip().strip("*.`'\"[]").strip())
        for label in candidates:
            score = self._labels.get(label.upper())
            if score is not None:
                return label.upper(), score
        return None

    async def grade(self, answer: str, task: Task, secrets: dict[str, str]) -> Grade:
        cfg = self.config
        missing = self.missing_target(task)
        if missing is not None:
            return Grade.ungradeable(missing, target=None)
        reference = self.target(task)
        too_long = Grade.too_long(answer, cfg.max_answer_chars, "judge", target=reference)
        if too_long is not None:
            return too_long
        started = time.monotonic()
        try:
            text, cached = await self.reply(answer, task, secrets)
        except JudgeUnavailable as exc:
            self.stats.failures += 1
            return Grade.failed(str(exc), target=reference, judge={"model": cfg.model})
        judge: dict[str, Any] = {
            "model": cfg.model,
            "reasoning": text[:_REASONING_CHARS],
            "cached": cached,
            "seconds": round(time.monotonic() - started, 3),
        }
        found = self.verdict(text)
        if found is None:
            self.stats.failures += 1
            return Grade.failed(
                "the judge's reply states no verdict it was asked for", target=reference, judge=judge
            )
        verdict, score = found
        judge.update(verdict=verdict, score=score)
        outcome = Outcome.CORRECT if score > 0 else Outcome.INCORRECT
        reason = f"the judge's verdict: {verdict}"
        return Grade(outcome, score, reason, {"target": reference, "judge": judge})
