"""Templates: the bounded Jinja sandbox (``_sandbox``) and the template API (``_template``)."""

from envbuilder.templating._sandbox import TooBig, jinja_env, render_budget, templates_dir
from envbuilder.templating._template import (
    Template,
    recording_files,
    render_limits,
    template_folders,
    template_globals,
    template_or_file,
)

__all__ = [
    "Template",
    "TooBig",
    "jinja_env",
    "recording_files",
    "render_budget",
    "render_limits",
    "template_folders",
    "template_globals",
    "template_or_file",
    "templates_dir",
]
