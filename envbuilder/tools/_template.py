"""The ``template`` tool: its output is a sandboxed Jinja template over the task and the input.

A hint (`{{ hint }}`), a lookup in a field holding a dict or list (`{{ table[key] }}`), a page
of a long document (`{{ document[page * 2000:(page + 1) * 2000] }}`): the template sees the
task's fields and the call's parameters (also as `input`; a parameter hides a field of the
same name). It is compiled at load time by the one template factory, so a template naming a
missing field or reaching for private attributes is refused by ``validate``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from envbuilder import deadlines
from envbuilder.errors import EnvbuilderError, ToolError
from envbuilder.templating import template_or_file
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolContext, ToolReply


class TemplateToolConfig(ToolConfig):
    """A tool whose output is a Jinja template over the task's fields and the call's input."""

    type: Literal["template"]
    template: str | None = None
    """The output as an inline Jinja template, e.g. `{{ hint }}`."""
    template_file: str | None = None
    """A template file instead (relative to the spec, or shipped in `templates/`)."""

    @model_validator(mode="after")
    def _one_template(self) -> TemplateToolConfig:
        if (self.template is None) == (self.template_file is None):
            raise ValueError("give exactly one of `template` or `template_file`")
        return self


class TemplateTool(Tool):
    Config = TemplateToolConfig
    config: TemplateToolConfig
    description = "Look something up about the task."

    def __init__(self, config: TemplateToolConfig, context: ToolContext):
        super().__init__(config, context)
        key = "template" if config.template is not None else "template_file"
        try:
            template = template_or_file(
                config.template, config.template_file, key=f"{self.name}.template", base_dir=context.base_dir
            )
        except EnvbuilderError as exc:
            raise ToolError(exc.message, loc=(key,), hint=exc.hint, code=exc.code) from None
        assert template is not None  # the config requires one of them
        self._template = template
        params = set(config.input or {})
        self._fields = self._template.variables - params - {"input"}

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self._fields)

    @property
    def fields_at(self) -> tuple[str | int, ...]:
        return ("template",) if self.config.template is not None else ("template_file",)

    async def run(self, call: ToolCall) -> ToolReply:
        try:
            context = {**call.task, **call.args, "input": call.args}
            render = self._template.render
            # More than fields shown: under its deadline, off the event loop.
            text = render(context) if self._template.bounded else await deadlines.offload(render, context)
        except EnvbuilderError as exc:
            # An index the data lacks (`table[key]` with an unknown key) is the agent's to fix.
            raise ToolError(exc.message) from None
        return ToolReply.text(text.strip())
