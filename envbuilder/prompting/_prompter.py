"""How a task becomes what the model sees: the role-tagged conversation, and its flat prompt.

A spec's ``prompt:`` is one of three kinds, all served as a conversation by ``/messages``:

* ``template`` / ``template_file``: one user message (images first, then the text), optionally
  after a system message;
* ``turns``: a list of role-tagged turns, each a template;
* ``conversation``: a task field that already holds the turns.

Any of them may show few-shot examples: prior user/assistant turns after the leading system
messages, or text written into the first user message (``inline``).

``/prompt`` is always the §7.2 flattening of that conversation, so a plain prompt is served
verbatim and a system prompt shows up as ``[system]`` / ``[user]`` headers, exactly as the
reference SDK serves an environment that implements only ``get_messages``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envbuilder.data import SplitView, Task
from envbuilder.errors import DataError, EnvbuilderError, Loc, did_you_mean
from envbuilder.prompting._conversation import ConversationReader
from envbuilder.prompting._fewshot import FewShot
from envbuilder.prompting._flatten import flatten_messages
from envbuilder.prompting._images import image_blocks
from envbuilder.protocol import ContentBlock, Message, TextBlock
from envbuilder.spec import PromptSpec
from envbuilder.templating import Template, template_or_file

__all__ = ["SAMPLE_ROWS", "Prompter"]

#: Rows of each split whose conversation and images are checked when a spec is loaded
#: (the first ones: one row-group read per split). Every request is checked as well.
SAMPLE_ROWS = 32


class _Turn:
    """One templated turn: its role, image fields and text template."""

    def __init__(self, role: str, text: Template | None, images: list[str], loc: Loc):
        self.role = role
        self.text = text
        self.images = images
        self.loc = loc

    def blocks(self, task: Task, base_dir: Path | None) -> list[ContentBlock]:
        out: list[ContentBlock] = []
        for field in self.images:
            out.extend(image_blocks(task.get(field), base_dir=base_dir, where=field))
        if self.text is not None:
            text = self.text.render(task)
            if text or not out:
                out.append(TextBlock(text=text))
        return out


def _message(role: str, blocks: Sequence[object]) -> Message:
    """A message (its placement is validated by the model)."""
    return Message(role=role, blocks=list(blocks))  # type: ignore[arg-type]


def _merge_text(blocks: list[ContentBlock], sep: str) -> list[ContentBlock]:
    """Join neighbouring text blocks with ``sep`` (inline few-shot stays one text block)."""
    out: list[ContentBlock] = []
    for block in blocks:
        if out and isinstance(block, TextBlock) and isinstance(out[-1], TextBlock):
            out[-1] = TextBlock(text=out[-1].text + sep + block.text)
        else:
            out.append(block)
    return out


class Prompter:
    """Renders a spec's ``prompt:`` block for a task; raises TemplateError/DataError (never
    anything else) when a task cannot be rendered."""

    def __init__(
        self, spec: PromptSpec, base_dir: Path | None, splits: Mapping[str, SplitView] | None = None
    ):
        self.spec = spec
        self.base_dir = base_dir
        self.splits = dict(splits or {})
        self.system = template_or_file(spec.system, None, key="prompt.system", base_dir=base_dir)
        self.turns: list[_Turn] = []
        self.conversation = ConversationReader(spec.conversation) if spec.conversation else None
        self.template: Template | None = None
        if spec.turns is not None:
            for i, turn in enumerate(spec.turns):
                text = template_or_file(
                    turn.template, turn.template_file, key=f"prompt.turns[{i}].template", base_dir=base_dir
                )
                self.turns.append(_Turn(turn.role, text, turn.images, ("prompt", "turns", i)))
        elif spec.conversation is None:
            self.template = template_or_file(
                spec.template, spec.template_file, key="prompt.template", base_dir=base_dir
            )
            self.turns.append(_Turn("user", self.template, spec.images, ("prompt",)))
        self.few_shot: FewShot | None = None
        self.shot_question: _Turn | None = None
        """How an example's question is rendered: a user turn over the example."""
        self._few_shot_problem: str | None = None
        fs = spec.few_shot
        if fs is not None:
            self.shot_question, self._few_shot_problem = self._question_turn(fs.template)
            if fs.split in self.splits and self.shot_question is not None:
                answer = Template(fs.answer, name="prompt.few_shot.answer", base_dir=base_dir)
                self.few_shot = FewShot(fs, self.splits[fs.split], answer)

    def _question_turn(self, template: str | None) -> tuple[_Turn | None, str | None]:
        """The turn an example's question renders as (else why there is none): ``template``,
        or the prompt's single user turn, with that turn's images."""
        users = [t for t in self.turns if t.role == "user"]
        loc = ("prompt", "few_shot", "template")
        if template is not None:
            text = Template(template, name="prompt.few_shot.template", base_dir=self.base_dir)
            return _Turn("user", text, users[0].images if len(users) == 1 else [], loc), None
        if self.conversation is not None:
            return None, "with a `conversation` prompt, few_shot needs `template` (an example's question)"
        if len(users) != 1:
            return None, (
                f"the turns hold {len(users)} user turns: few_shot needs `template` (an example's question)"
            )
        return _Turn("user", users[0].text, users[0].images, users[0].loc), None

    # -- load-time checks ------------------------------------------------------------------------

    def variables(self) -> dict[Loc, frozenset[str]]:
        """The task fields each template reads, by the spec key that holds it."""
        out: dict[Loc, frozenset[str]] = {}
        if self.system is not None:
            out[("prompt", "system")] = self.system.variables
        for turn in self.turns:
            if turn.text is not None:
                out[turn.loc] = turn.text.variables
        if self.few_shot is not None:
            out[("prompt", "few_shot", "answer")] = self.few_shot.answer.variables
        question = self.shot_question
        if question is not None and question.text is not None and question.loc[:2] == ("prompt", "few_shot"):
            out[question.loc] = question.text.variables
        return out

    def task_fields(self) -> frozenset[str]:
        """The fields of the asked task that rendering it reads (few-shot examples aside)."""
        names: set[str] = {field for _, field in self._fields_used()}
        for loc, variables in self.variables().items():
            if loc[:2] != ("prompt", "few_shot"):
                names |= variables
        return frozenset(names)

    def _fields_used(self) -> list[tuple[Loc, str]]:
        used: list[tuple[Loc, str]] = []
        for turn in self.turns:
            base = ("prompt",) if turn.loc == ("prompt",) else turn.loc
            used.extend(((*base, "images", k), f) for k, f in enumerate(turn.images))
        if self.spec.conversation is not None:
            used.append((("prompt", "conversation", "column"), self.spec.conversation.column))
        return used

    def check(self) -> list[tuple[Loc, EnvbuilderError]]:
        """Problems found without serving: unknown fields and splits, and bad conversations or
        images in the first :data:`SAMPLE_ROWS` rows of each split (read only when the prompt
        takes images or a conversation from the data)."""
        problems: list[tuple[Loc, EnvbuilderError]] = []
        fs = self.spec.few_shot
        if fs is not None and self._few_shot_problem is not None:
            problems.append(
                (
                    ("prompt", "few_shot"),
                    DataError(
                        self._few_shot_problem,
                        hint='e.g. `template: "{{ question }}"`: the examples\' user turns',
                        code="few_shot_question",
                    ),
                )
            )
        if fs is not None and fs.split not in self.splits:
            problems.append(
                (
                    ("prompt", "few_shot", "split"),
                    DataError(
                        f"few_shot.split {fs.split!r} is not a split of this environment",
                        hint=did_you_mean(fs.split, self.splits)
                        or f"Its splits are: {', '.join(self.splits)}",
                        code="unknown_split",
                    ),
                )
            )
        used = self._fields_used()
        for name, view in self.splits.items():
            fields = set(view.shaper.fields)
            missing = [(loc, f) for loc, f in used if f not in fields]
            for loc, field in missing:
                problems.append(
                    (
                        loc,
                        DataError(
                            f"split {name!r} has no field {field!r}",
                            hint=did_you_mean(field, fields) or f"Task fields: {', '.join(sorted(fields))}",
                            code="unknown_field",
                        ),
                    )
                )
            if used and not missing:
                problems.extend(self._check_sample(name, view, used))
        return problems

    def _check_sample(
        self, name: str, view: SplitView, used: list[tuple[Loc, str]]
    ) -> list[tuple[Loc, EnvbuilderError]]:
        for index, task in enumerate(view.task_range(0, SAMPLE_ROWS)):
            for loc, field in used:
                try:
                    if loc[1] == "conversation":
                        assert self.conversation is not None
                        self.conversation.messages(task)
                    else:
                        image_blocks(task.get(field), base_dir=self.base_dir, where=field)
                except EnvbuilderError as exc:
                    message = f"split {name!r} row {index}: {exc.message}"
                    located = DataError(message, hint=exc.hint, code=exc.code)
                    return [(loc, located)]  # one located example per split is enough to act on
        return []

    def failures(self, tasks: Sequence[Task]) -> dict[int, tuple[Loc, EnvbuilderError]]:
        """The tasks of ``tasks`` whose prompt fails to render, by position: the key of the
        first part that fails and its error. Reads what :meth:`messages` renders from the task
        itself (the system and turn templates, or the row's conversation); images and few-shot
        examples are checked on a sample at load time and on each request. Each template renders
        over the whole batch at once, and row by row only when the batch fails."""
        out: dict[int, tuple[Loc, EnvbuilderError]] = {}
        if self.conversation is not None:
            for i, task in enumerate(tasks):
                try:
                    self.conversation.messages(task)
                except EnvbuilderError as exc:
                    out[i] = (("prompt", "conversation"), exc)
        parts = [(self._text_key(turn), turn.text) for turn in self.turns if turn.text is not None]
        if self.conversation is not None:
            parts = []  # the row's messages replace the turns
        if self.system is not None:
            parts.insert(0, (("prompt", "system"), self.system))
        for loc, template in parts:
            try:
                template.render_each(tasks)
                continue
            except EnvbuilderError:
                pass
            for i, task in enumerate(tasks):
                if i not in out:
                    try:
                        template.render(task)
                    except EnvbuilderError as exc:
                        out[i] = (loc, exc)
        return out

    def _text_key(self, turn: _Turn) -> Loc:
        """``prompt.template``, ``prompt.turns[1].template_file`` …: the key of a turn's text."""
        block: Any = self.spec if turn.loc == ("prompt",) else self.spec.turns[int(turn.loc[2])]  # type: ignore[index]
        return (*turn.loc, "template" if block.template is not None else "template_file")

    # -- serving ---------------------------------------------------------------------------------

    def _system(self, task: Task) -> list[Message]:
        if self.system is None:
            return []
        return [Message(role="system", blocks=[TextBlock(text=self.system.render(task))])]

    def _with_few_shot(self, task: Task, messages: list[Message]) -> list[Message]:
        """``messages`` with the examples for ``task`` after the leading system messages, as
        prior turns, or written into the first user message (``inline``)."""
        fs, question = self.few_shot, self.shot_question
        assert fs is not None and question is not None
        shots = [(question.blocks(ex, self.base_dir), fs.render_answer(ex)) for ex in fs.examples(task)]
        if not shots:  # a split holding only the task asked
            return messages
        lead = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
        if fs.spec.style == "turns":
            pairs: list[Message] = []
            for question_blocks, answer in shots:
                pairs.append(_message("user", question_blocks))
                pairs.append(_message("assistant", [TextBlock(text=answer)]))
            return [*messages[:lead], *pairs, *messages[lead:]]
        sep = fs.spec.separator
        inline: list[ContentBlock] = []
        for question_blocks, answer in shots:
            inline.extend(_merge_text([*question_blocks, TextBlock(text=answer)], "\n"))
        first = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        if first is None:  # no user message to write into: the examples become one
            return [*messages[:lead], _message("user", _merge_text(inline, sep)), *messages[lead:]]
        blocks: list[Any] = list(messages[first].blocks)
        if self.conversation is None:  # a templated turn: before its images and text
            blocks = _merge_text([*inline, *blocks], sep)
        else:  # a row's message: before its first text, which keeps its `detail`
            at = next((j for j, b in enumerate(blocks) if isinstance(b, TextBlock)), None)
            if at is None:
                blocks = [*_merge_text(inline, sep), *blocks]
            else:
                text = blocks[at]
                assert isinstance(text, TextBlock)
                head = _merge_text([*inline, TextBlock(text="")], sep)
                last = head[-1]
                assert isinstance(last, TextBlock)
                merged = text.model_copy(update={"text": last.text + text.text})
                blocks[at : at + 1] = [*head[:-1], merged]
        return [*messages[:first], _message(messages[first].role, blocks), *messages[first + 1 :]]

    @property
    def inline(self) -> bool:
        """Whether a prompt renders in bounded time without I/O (no images, no few-shot rows to
        read, no template with loops, macros or includes): then it may run on the event loop."""
        templates = [self.system, self.template, *(t.text for t in self.turns)]
        return (
            self.few_shot is None
            and self.conversation is None
            and not any(t.images for t in self.turns)
            and all(t is None or t.bounded for t in templates)
        )

    def messages(self, task: Task) -> list[Message]:
        """The task as a role-tagged conversation (``GET /{env}/messages``)."""
        out = self._system(task)
        if self.conversation is not None:
            out.extend(self.conversation.messages(task))
        else:
            for turn in self.turns:
                out.append(_message(turn.role, turn.blocks(task, self.base_dir)))
        if self.few_shot is not None:
            out = self._with_few_shot(task, out)
        return out

    def prompt(self, task: Task) -> list[ContentBlock]:
        """The task as prompt blocks (``GET /{env}/prompt``): the flattened conversation."""
        return flatten_messages(self.messages(task))
