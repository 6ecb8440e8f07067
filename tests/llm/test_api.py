"""The chat-endpoint package: its public names, and that importing it (or a grader module that
uses it) does not import the HTTP client."""

import subprocess
import sys

import envbuilder.llm


def test_llm_api() -> None:
    assert envbuilder.llm.__all__ == [
        "APIS",
        "DEFAULT_RETRY",
        "ENDPOINT_VARIABLES",
        "PRICES",
        "PRICES_AS_OF",
        "AnthropicModel",
        "ChatModel",
        "Describe",
        "EndpointUse",
        "ModelError",
        "Price",
        "ReplyCache",
        "ResponsesModel",
        "Sampling",
        "Usage",
        "cache_key",
        "chat_body",
        "endpoint_variable",
        "model_class",
        "open_cache",
        "override_endpoints",
        "price_of",
        "reply_text",
        "resolve_api_key",
    ]


def _imports_httpx(code: str) -> bool:
    probe = f"import sys\n{code}\nprint('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


def test_httpx_is_imported_only_when_a_model_is_built() -> None:
    assert not _imports_httpx(
        "import envbuilder.llm, envbuilder.graders._judge, envbuilder.episode.simulated_user"
    )
    # The probe can fail: building a model is what imports it.
    assert _imports_httpx("import envbuilder.llm\nenvbuilder.llm.ChatModel('http://127.0.0.1:9/v1', 'm')")
