"""How a task becomes what the model sees: the role-tagged conversation, and its flat prompt.

A spec's ``prompt:`` is one of three kinds, all served as a conversation by ``/messages``:

* ``template`` / ``template_file``: one user message (images first, then the text), optionally
  after a system message and few-shot turns;
* ``turns``: a list of role-tagged turns, each a template;
* ``conversation``: a task field that already holds the turns.

``/prompt`` is always the §7.2 flattening of that conversation, so a plain prompt is served
verbatim and a system prompt shows up as ``[system]`` / ``[user]`` headers, exactly as the
reference SDK serves an environment that implements only ``get_messages``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from envbuilder.data import SplitView, Task
from envbuilder.errors import DataError, EnvbuilderError, did_you_mean
from envbuilder.prompting._conversation import ConversationReader
from envbuilder.prompting._fewshot import FewShot
from envbuilder.prompting._flatten import flatten_messages
from envbuilder.prompting._images import image_blocks
from envbuilder.protocol import ContentBlock, Message, TextBlock
from envbuilder.spec import PromptSpec
from envbuilder.templating import Template

__all__ = ["SAMPLE_ROWS", "Prompter"]

Loc = tuple[str | int, ...]

#: Rows of each split whose conversation and images are checked when a spec is loaded
#: (the first ones: one row-group read per split). Every request is checked as well.
SAMPLE_ROWS = 32


def _template(
    template: str | None, template_file: str | None, name: str, base_dir: Path | None
) -> Template | None:
    if template_file is not None:
        return Template(template_file, name=f"{name}_file", base_dir=base_dir, from_file=True)
    if template is not None:
        return Template(template, name=name, base_dir=base_dir)
    return None


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
        self.system = _template(spec.system, None, "prompt.system", base_dir)
        self.turns: list[_Turn] = []
        self.conversation = ConversationReader(spec.conversation) if spec.conversation else None
        self.template: Template | None = None
        if spec.turns is not None:
            for i, turn in enumerate(spec.turns):
                text = _template(turn.template, turn.template_file, f"prompt.turns[{i}].template", base_dir)
                self.turns.append(_Turn(turn.role, text, turn.images, ("prompt", "turns", i)))
        elif spec.conversation is None:
            self.template = _template(spec.template, spec.template_file, "prompt.template", base_dir)
            self.turns.append(_Turn("user", self.template, spec.images, ("prompt",)))
        self.few_shot: FewShot | None = None
        fs = spec.few_shot
        if fs is not None and fs.split in self.splits and self.template is not None:
            question = (
                Template(fs.template, name="prompt.few_shot.template", base_dir=base_dir)
                if fs.template is not None
                else self.template
            )
            answer = Template(fs.answer, name="prompt.few_shot.answer", base_dir=base_dir)
            self.few_shot = FewShot(fs, self.splits[fs.split], question, answer)

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
            if self.spec.few_shot is not None and self.spec.few_shot.template is not None:
                out[("prompt", "few_shot", "template")] = self.few_shot.question.variables
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

    # -- serving ---------------------------------------------------------------------------------

    def _system(self, task: Task) -> list[Message]:
        if self.system is None:
            return []
        return [Message(role="system", blocks=[TextBlock(text=self.system.render(task))])]

    def _few_shot(self, task: Task, user: list[ContentBlock]) -> list[Message]:
        fs = self.few_shot
        assert fs is not None
        examples = fs.examples(task)
        shots = [
            (_Turn("user", fs.question, self.spec.images, ("prompt",)).blocks(ex, self.base_dir), ex)
            for ex in examples
        ]
        if fs.spec.style == "turns":
            out: list[Message] = []
            for blocks, ex in shots:
                out.append(_message("user", blocks))
                out.append(_message("assistant", [TextBlock(text=fs.render_answer(ex))]))
            return [*out, _message("user", user)]
        inline: list[ContentBlock] = []
        for blocks, ex in shots:
            inline.extend(_merge_text([*blocks, TextBlock(text=fs.render_answer(ex))], "\n"))
        return [_message("user", _merge_text([*inline, *user], fs.spec.separator))]

    def messages(self, task: Task) -> list[Message]:
        """The task as a role-tagged conversation (``GET /{env}/messages``)."""
        out = self._system(task)
        if self.conversation is not None:
            return out + self.conversation.messages(task)
        if self.few_shot is not None:
            return out + self._few_shot(task, self.turns[0].blocks(task, self.base_dir))
        for turn in self.turns:
            out.append(_message(turn.role, turn.blocks(task, self.base_dir)))
        return out

    def prompt(self, task: Task) -> list[ContentBlock]:
        """The task as prompt blocks (``GET /{env}/prompt``): the flattened conversation."""
        return flatten_messages(self.messages(task))
