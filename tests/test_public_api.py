"""The package's public API is a contract: adding or removing a name is a deliberate change."""

import envbuilder
import envbuilder.authoring
import envbuilder.client
import envbuilder.data
import envbuilder.eval
import envbuilder.graders
import envbuilder.server
import envbuilder.spec


def test_top_level_api() -> None:
    assert sorted(envbuilder.__all__) == sorted([
        "Environment", "EnvbuilderError", "Episode", "SpecError", "__version__",
        "load_environment", "load_spec"])


def test_subpackage_apis_are_sorted_and_resolve() -> None:
    for module in (envbuilder, envbuilder.data, envbuilder.graders, envbuilder.server,
                   envbuilder.spec, envbuilder.authoring, envbuilder.client, envbuilder.eval):
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
