"""envbuilder: declare an LLM-agent environment in YAML and serve it over ORS."""

__version__ = "0.1.0"

from envbuilder.environment import Environment, Episode, load_environment
from envbuilder.errors import EnvbuilderError, SpecError
from envbuilder.spec import load_spec

__all__ = [
    "EnvbuilderError",
    "Environment",
    "Episode",
    "SpecError",
    "__version__",
    "load_environment",
    "load_spec",
]
