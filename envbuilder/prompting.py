"""How a task becomes what the model sees: the prompt blocks and the role-tagged conversation."""

from __future__ import annotations

from pathlib import Path

from envbuilder.data import Task
from envbuilder.protocol import ContentBlock, Message, TextBlock
from envbuilder.spec import PromptSpec
from envbuilder.templating import Template

__all__ = ["Prompter"]


class Prompter:
    """Renders a spec's ``prompt:`` block for a task."""

    def __init__(self, spec: PromptSpec, base_dir: Path | None):
        if spec.template_file is not None:
            self.template = Template(
                spec.template_file, name="prompt.template_file", base_dir=base_dir, from_file=True
            )
        else:
            assert spec.template is not None
            self.template = Template(spec.template, name="prompt.template", base_dir=base_dir)
        self.system = (
            Template(spec.system, name="prompt.system", base_dir=base_dir)
            if spec.system is not None
            else None
        )

    def variables(self) -> dict[tuple[str, ...], frozenset[str]]:
        """The task fields each template reads, by the spec key that holds it."""
        out: dict[tuple[str, ...], frozenset[str]] = {("prompt",): self.template.variables}
        if self.system is not None:
            out[("prompt", "system")] = self.system.variables
        return out

    def prompt(self, task: Task) -> list[ContentBlock]:
        return [TextBlock(text=self.template.render(task))]

    def messages(self, task: Task) -> list[Message]:
        out: list[Message] = []
        if self.system is not None:
            out.append(Message(role="system", blocks=[TextBlock(text=self.system.render(task))]))
        out.append(Message(role="user", blocks=list(self.prompt(task))))
        return out
