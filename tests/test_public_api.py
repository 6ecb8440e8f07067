"""The package's public API is a contract: adding or removing a name is a deliberate change."""

import importlib
import pkgutil
from types import ModuleType

import envbuilder
import envbuilder.authoring
import envbuilder.client
import envbuilder.data
import envbuilder.eval
import envbuilder.graders
import envbuilder.isolation.sandbox
import envbuilder.server
import envbuilder.spec
import envbuilder.tools


def test_top_level_api() -> None:
    assert sorted(envbuilder.__all__) == sorted(
        [
            "Environment",
            "EnvbuilderError",
            "Episode",
            "SpecError",
            "__version__",
            "load_environment",
            "load_spec",
        ]
    )


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: SCREAMING_CASE, then CamelCase, then the rest, each A-Z."""
    return (0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2, name)


def _public_modules() -> list[ModuleType]:
    """envbuilder and each of its public modules and packages (no `_private` part)."""
    names = [m.name for m in pkgutil.walk_packages(envbuilder.__path__, "envbuilder.")]
    public = [n for n in names if not any(part.startswith("_") for part in n.split("."))]
    return [envbuilder, *(importlib.import_module(n) for n in public)]


def test_subpackage_apis_are_sorted_and_resolve() -> None:
    modules = _public_modules()
    assert {m.__name__ for m in modules} >= {
        "envbuilder.authoring", "envbuilder.catalog", "envbuilder.client", "envbuilder.data",
        "envbuilder.errors", "envbuilder.eval", "envbuilder.graders", "envbuilder.prompting",
        "envbuilder.isolation.sandbox", "envbuilder.server", "envbuilder.spec", "envbuilder.templating",
        "envbuilder.tools"}  # fmt: skip
    for module in modules:
        names = getattr(module, "__all__", None)
        if names is None:
            continue  # a module that exports by definition only (protocol: the wire models)
        assert list(names) == sorted(names, key=_isort_key), module.__name__
        assert len(set(names)) == len(names), module.__name__
        for name in names:
            assert hasattr(module, name), (module.__name__, name)


def test_the_sort_check_can_fail() -> None:
    assert sorted(["b", "a"], key=_isort_key) == ["a", "b"]
    assert sorted(["Prompter", "SAMPLE_ROWS", "api"], key=_isort_key) == ["SAMPLE_ROWS", "Prompter", "api"]


def test_client_api() -> None:
    assert envbuilder.client.__all__ == [
        "AsyncClient",
        "AsyncRemoteEnvironment",
        "AsyncSession",
        "Client",
        "ClientError",
        "EpisodeFinished",
        "InputValidation",
        "NotFound",
        "RemoteEnvironment",
        "ResponseError",
        "RetryPolicy",
        "ServerError",
        "Session",
        "SessionGone",
        "ToolCallError",
        "ToolFailed",
        "ToolInputInvalid",
        "ToolNotFound",
        "TransportError",
        "convert_messages",
        "convert_tools",
    ]
    assert issubclass(envbuilder.client.ClientError, envbuilder.EnvbuilderError)


def test_eval_api() -> None:
    assert envbuilder.eval.__all__ == [
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
        "profile_split",  # was envbuilder.profiling (issue 33: a profile's run is an eval)
        "regrade_run",
        "run_eval",
        "summarize",
        "table_path",
        "wilson",
        "write_report",
    ]


def test_tools_api() -> None:
    assert envbuilder.tools.__all__ == [
        "ParamSpec",
        "Step",
        "Steps",
        "Tool",
        "ToolCall",
        "ToolConfig",
        "ToolContext",
        "ToolReply",
        "input_model",
        "tools",
    ]
    assert {"calculator", "retrieve", "template", "python", "bash"} <= set(envbuilder.tools.tools.names())
    assert {"read_file", "write_file", "edit_file"} <= set(envbuilder.tools.tools.names())


def test_sandbox_api() -> None:
    assert envbuilder.isolation.sandbox.__all__ == [
        "BACKEND_ENV",
        "BASE_PACKAGES",
        "Backend",
        "BubblewrapBackend",
        "ContainerPool",
        "ContainerSpec",
        "DockerBackend",
        "EffectiveLimits",
        "ImageBuild",
        "ImageBuildSpec",
        "ImageRecipe",
        "Limits",
        "Maxima",
        "RepositorySpec",
        "RunResult",
        "SessionContainers",
        "Slots",
        "Status",
        "Workspace",
        "alias_image",
        "backend_from_name",
        "base_image",
        "build_image",
        "check_limits",
        "default_backend",
        "default_concurrency",
        "default_image",
        "new_name",
        "repository_tree",
        "run_code",
        "server_id",
        "shared_slots",
        "strip_git",
        "task_limits",
    ]
    assert {"unit_tests", "repo_tests"} <= set(envbuilder.graders.graders.names())


def test_server_api() -> None:
    assert envbuilder.server.__all__ == [
        "ServerSettings",
        "check_doors",
        "check_exposure",
        "check_store_url",
        "create_app",
        "read_api_keys",
        "serving_app",
        "set_protocol_limits",
        "uvicorn_options",
    ]


def test_processes_api() -> None:
    import envbuilder.isolation.processes

    assert envbuilder.isolation.processes.__all__ == [
        "ALLOW_UNCONFINED_ENV",
        "MEMORY_LIMIT",
        "NICENESS",
        "PROCESSES_ENV",
        "START_TIMEOUT",
        "CheckTimeout",
        "CodeRefused",
        "Confinement",
        "ProcessPool",
        "WorkerError",
        "WorkerFailed",
        "allow_unconfined",
        "confined_pool",
        "confinement",
        "default_size",
        "grading_pool",
        "guarded",
        "require_confinement",
        "run_checked",
        "run_confined",
        "serving_confinement",
        "why_unconfined",
        "worker_function",
    ]
