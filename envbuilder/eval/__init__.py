"""Evaluate a model on an environment: an agent loop over an OpenAI-compatible endpoint.

``plan_eval`` picks the episodes (skipping those an earlier run finished), ``run_eval`` plays
them concurrently on a ``LocalBackend`` (a compiled spec, in-process) or a ``RemoteBackend``
(an ORS server), writes one JSON line per episode, and returns a ``Summary``.
"""

from envbuilder.eval._backends import LocalBackend, RemoteBackend
from envbuilder.eval._model import ChatModel, ModelError
from envbuilder.eval._results import Summary, load_records, summarize
from envbuilder.eval._runner import EvalPlan, plan_eval, run_eval

__all__ = [
    "ChatModel",
    "EvalPlan",
    "LocalBackend",
    "ModelError",
    "RemoteBackend",
    "Summary",
    "load_records",
    "plan_eval",
    "run_eval",
    "summarize",
]
