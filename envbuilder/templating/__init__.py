"""Templates: the bounded Jinja sandbox (``_sandbox``) and the template API (``_template``)."""

from envbuilder.templating._sandbox import jinja_env, templates_dir
from envbuilder.templating._template import (
    Template,
    recording_files,
    render_limits,
    template_globals,
    template_or_file,
)

__all__ = [
    "Template",
    "jinja_env",
    "recording_files",
    "render_limits",
    "template_globals",
    "template_or_file",
    "templates_dir",
]
