"""The package's public API is a contract: adding or removing a name is a deliberate change."""

import envbuilder
import envbuilder.authoring
import envbuilder.client
import envbuilder.data
import envbuilder.eval
import envbuilder.graders
import envbuilder.sandbox
import envbuilder.server
import envbuilder.spec
import envbuilder.tools


def test_top_level_api() -> None:
    assert sorted(envbuilder.__all__) == sorted([
        "Environment", "EnvbuilderError", "Episode", "SpecError", "__version__",
        "load_environment", "load_spec"])


def test_subpackage_apis_are_sorted_and_resolve() -> None:
    for module in (envbuilder, envbuilder.data, envbuilder.graders, envbuilder.server,
                   envbuilder.spec, envbuilder.authoring, envbuilder.client, envbuilder.eval,
                   envbuilder.tools, envbuilder.sandbox):
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)


def test_client_api() -> None:
    assert envbuilder.client.__all__ == [
        "AsyncClient", "AsyncRemoteEnvironment", "AsyncSession", "Client", "ClientError",
        "EpisodeFinished", "InputValidation", "NotFound", "RemoteEnvironment", "ResponseError",
        "RetryPolicy", "ServerError", "Session", "SessionGone", "ToolCallError", "ToolFailed",
        "ToolInputInvalid", "ToolNotFound", "TransportError", "convert_messages", "convert_tools"]
    assert issubclass(envbuilder.client.ClientError, envbuilder.EnvbuilderError)


def test_eval_api() -> None:
    assert envbuilder.eval.__all__ == [
        "OUTCOMES", "ChatModel", "Comparison", "Difference", "Estimate", "EvalPlan", "LocalBackend",
        "ModelError", "RemoteBackend", "ResultsFile", "RunIdentity", "RunMismatch", "Sampling", "Summary",
        "clustered_mean", "compare_runs", "outcome_of", "paired_difference", "pass_at_k", "plan_eval",
        "run_eval", "summarize", "write_report"]


def test_tools_api() -> None:
    assert envbuilder.tools.__all__ == [
        "ParamSpec", "Tool", "ToolCall", "ToolConfig", "ToolContext", "ToolReply", "input_model", "tools"]
    assert {"calculator", "retrieve", "template", "python", "bash"} <= set(envbuilder.tools.tools.names())


def test_sandbox_api() -> None:
    assert envbuilder.sandbox.__all__ == [
        "BACKEND_ENV", "Backend", "BubblewrapBackend", "DockerBackend", "Limits", "RunResult", "Slots",
        "Status", "backend_from_name", "default_backend", "default_concurrency", "run_code", "shared_slots"]
    assert "unit_tests" in envbuilder.graders.graders.names()
