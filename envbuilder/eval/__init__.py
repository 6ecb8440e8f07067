"""Evaluate a model on an environment: an agent loop over an OpenAI-compatible endpoint.

``plan_eval`` fixes the run's identity and picks the episodes (refusing a results file of another
run, skipping episodes it already holds), ``run_eval`` plays them concurrently on a
``LocalBackend`` (a compiled spec, in-process) or a ``RemoteBackend`` (an ORS server) and appends
one JSON line per episode, ``summarize`` scores them, ``compare_runs`` pairs two runs,
``regrade_run`` replays a stored run on another version of its spec, and ``write_report``
renders a run as one self-contained HTML page. The model is a ``ChatModel`` (chat completions),
an ``AnthropicModel`` (Messages API) or a ``ResponsesModel`` (OpenAI Responses API), all from
:mod:`envbuilder.llm` (re-exported here for eval's callers).
"""

from envbuilder.eval._backends import LocalBackend, RemoteBackend
from envbuilder.eval._compare import Comparison, Difference, compare_runs
from envbuilder.eval._profile import profile_split, table_path
from envbuilder.eval._regrade import Regrade, regrade_run
from envbuilder.eval._report import write_report
from envbuilder.eval._results import OUTCOMES, Summary, outcome_of, summarize
from envbuilder.eval._run import ResultsFile, RunIdentity, RunMismatch
from envbuilder.eval._runner import EvalPlan, plan_eval, run_eval
from envbuilder.eval._stats import Estimate, clustered_mean, paired_difference, pass_at_k, wilson
from envbuilder.llm import AnthropicModel, ChatModel, ModelError, ResponsesModel, Sampling

__all__ = [
    "OUTCOMES",
    "AnthropicModel",
    "ChatModel",
    "Comparison",
    "Difference",
    "Estimate",
    "EvalPlan",
    "LocalBackend",
    "ModelError",
    "Regrade",
    "RemoteBackend",
    "ResponsesModel",
    "ResultsFile",
    "RunIdentity",
    "RunMismatch",
    "Sampling",
    "Summary",
    "clustered_mean",
    "compare_runs",
    "outcome_of",
    "paired_difference",
    "pass_at_k",
    "plan_eval",
    "profile_split",
    "regrade_run",
    "run_eval",
    "summarize",
    "table_path",
    "wilson",
    "write_report",
]
