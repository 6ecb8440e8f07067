"""End to end: the shipped conversation, image and multiple-choice envs (and a rich-block fixture)
served by a real uvicorn and consumed by the ``openreward`` client's ``get_messages(format=...)``."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import httpx
import pytest

from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from tests.conftest import ENVS
from tests.prompting.conftest import RICH
from tests.servers import serve_app

ESCAPE = """\
name: %s
dataset: {type: parquet, files: {test: %s}}
splits: {test: {}}
prompt:
  %s
grader: {type: exact_match, target: "{{ answer }}"}
"""
GSM8K_TEST = ENVS / "data/gsm8k/test-00000-of-00001.parquet"
ESCAPES = {
    "escape_mro": ESCAPE
    % ("escape_mro", GSM8K_TEST, "template: \"{{ ''|attr('__cl' ~ 'ass__') }} {{ question }}\""),
    "escape_globals": ESCAPE
    % (
        "escape_globals",
        GSM8K_TEST,
        "system: \"{{ cycler['__in' ~ 'it__']['__glo' ~ 'bals__'] }}\"\n  template: \"{{ question }}\"",
    ),
}


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Environment]:
    folder = tmp_path_factory.mktemp("specs")
    (folder / "rich.yaml").write_text(RICH)
    loaded = [load_environment(ENVS / f"{n}.yaml") for n in ("mmlu_stem", "hh_rlhf", "digits")]
    loaded.append(load_environment(folder / "rich.yaml"))
    for name, text in ESCAPES.items():
        (folder / f"{name}.yaml").write_text(text)
        loaded.append(load_environment(folder / f"{name}.yaml"))
    return {e.name: e for e in loaded}


@pytest.fixture(scope="module")
def url(envs: dict[str, Environment]) -> Iterator[str]:
    with serve_app(create_app(list(envs.values()), ServerSettings(client_tasks=True))) as base:
        yield base


@pytest.fixture(scope="module")
def api(url: str) -> Iterator[object]:
    from openreward import EnvironmentsAPI

    client = EnvironmentsAPI(base_url=url, api_key=None)
    yield client
    close = getattr(client, "close", None)
    if close is not None:
        close()


def _session(api: object, env: str, index: int = 0, split: str = "test"):
    return api.get(name=env, variant=env).session(split=split, index=index)  # type: ignore[attr-defined]


def test_rich_conversation_in_every_format(api: object) -> None:
    from openreward.api.environments.types import ReasoningBlock, ToolCallBlock, ToolResultBlock

    assert api.get(name="rich", variant="rich").list_tools(format=None)  # type: ignore[attr-defined]
    with _session(api, "rich", 0) as s:
        raw = s.get_messages()
        assert [m.role for m in raw] == ["system", "user", "assistant", "user"]
        assert [type(b) for b in raw[2].blocks][::2] == [ReasoningBlock, ToolCallBlock]
        assert isinstance(raw[3].blocks[0], ToolResultBlock)

        openai = s.get_messages(format="openai")
        assert openai == [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": "What is 6*7? Use the calculator."},
            {
                "role": "assistant",
                "content": "Let me compute that.",
                "reasoning_content": "I should call the calculator.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "calculator", "arguments": '{"expr": "6*7"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
            {"role": "user", "content": "Now give the final answer."},
        ]

        anthropic = s.get_messages(format="anthropic")
        assert anthropic["system"] == "You are a careful assistant."
        assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant", "user"]
        assert anthropic["messages"][1]["content"][0] == {
            "type": "thinking",
            "thinking": "I should call the calculator.",
        }
        assert anthropic["messages"][2]["content"][0] == {
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": [{"type": "text", "text": "42"}],
        }

        with pytest.raises(ValueError, match="no input representation for reasoning"):
            s.get_messages(format="google")

        prompt = s.get_prompt()
        assert [b.text for b in prompt][:4] == [
            "[system]",
            "You are a careful assistant.",
            "[user]",
            "What is 6*7? Use the calculator.",
        ]
        assert "<think>I should call the calculator.</think>" in [b.text for b in prompt]


def test_image_in_tool_result(api: object) -> None:
    with _session(api, "rich", 2) as s:
        with pytest.raises(ValueError, match="cannot carry images inside tool results"):
            s.get_messages(format="openai")
        with pytest.raises(ValueError, match="cannot carry images inside tool results"):
            s.get_messages(format="google")
        anthropic = s.get_messages(format="anthropic")
        result = anthropic["messages"][2]["content"][0]
        assert result["is_error"] is True and result["content"][0]["source"]["media_type"] == "image/png"
        assert [b.text for b in s.get_prompt() if b.type == "text"][-1] == "[tool_result (error)]"


def test_single_user_message_prompt_is_verbatim(api: object) -> None:
    with _session(api, "rich", 1) as s:
        assert [(b.type, b.text, b.detail) for b in s.get_prompt()] == [("text", "What is 2+3?", None)]
        assert s.get_messages(format="google") == {
            "system_instruction": None,
            "contents": [{"role": "user", "parts": [{"text": "What is 2+3?"}]}],
        }


def test_hh_rlhf_conversation(api: object, envs: dict[str, Environment]) -> None:
    task = envs["hh_rlhf"].split("test").task(4)
    with _session(api, "hh_rlhf", 4) as s:
        google = s.get_messages(format="google")
        assert google["system_instruction"].startswith("You are a helpful and harmless assistant.")
        roles = ["model" if t["role"] == "assistant" else "user" for t in task["messages"]]
        assert [c["role"] for c in google["contents"]] == roles
        assert google["contents"][-1] == {
            "role": "user",
            "parts": [{"text": task["messages"][-1]["content"]}],
        }
        anthropic = s.get_messages(format="anthropic")
        assert anthropic["messages"][0] == {
            "role": "user",
            "content": [{"type": "text", "text": task["messages"][0]["content"]}],
        }
        openai = s.get_messages(format="openai")
        assert openai[0]["role"] == "system" and len(openai) == len(task["messages"]) + 1
        out = s.call_tool("submit", {"answer": task["chosen_response"].upper()})
        assert (out.reward, out.metadata["outcome"]) == (1.0, "correct")
    with _session(api, "hh_rlhf", 4) as s:
        out = s.call_tool("submit", {"answer": "I can't help with that."})
        assert out.reward == 0.0


def test_digits_image_prompt(api: object, envs: dict[str, Environment]) -> None:
    with _session(api, "digits", 9) as s:
        [message] = s.get_messages()
        image, text = message.blocks
        assert image.mimeType == "image/png" and base64.b64decode(image.data).startswith(b"\x89PNG")
        assert "Which digit" in text.text
        openai = s.get_messages(format="openai")
        assert openai[0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
        anthropic = s.get_messages(format="anthropic")
        assert anthropic["messages"][0]["content"][0]["source"]["media_type"] == "image/png"
        google = s.get_messages(format="google")
        assert google["contents"][0]["parts"][0]["inline_data"]["mime_type"] == "image/png"
        assert [b.type for b in s.get_prompt()] == ["image", "text"]
        digit = envs["digits"].split("test").task(9)["answer"]
        assert s.call_tool("submit", {"answer": f"It is a {digit}."}).reward == 1.0


def test_mmlu_letter_grading(api: object, envs: dict[str, Environment]) -> None:
    task = envs["mmlu_stem"].split("test").task(3)
    letter = "ABCD"[task["answer"]]
    wrong = "ABCD"[(task["answer"] + 1) % 4]
    with _session(api, "mmlu_stem", 3) as s:
        [message] = s.get_messages()
        assert message.role == "user" and len(message.blocks) == 1
        assert s.get_messages(format="anthropic")["system"] is None
        assert s.call_tool("submit", {"answer": f"The answer is {letter}"}).reward == 1.0
    with _session(api, "mmlu_stem", 3) as s:
        assert s.call_tool("submit", {"answer": wrong}).reward == 0.0


@pytest.mark.parametrize(
    ("env", "detail"),
    [
        (
            "escape_mro",
            "prompt.template: refused by the template sandbox: access to attribute '__class__' of 'str' "
            "object is unsafe. Templates may only read the task's fields",
        ),
        (
            "escape_globals",
            "prompt.system: refused by the template sandbox: access to attribute '__init__' of 'type' "
            "object is unsafe. Templates may only read the task's fields",
        ),
    ],
)
def test_sandbox_escape_is_a_json_error_and_the_server_keeps_serving(url: str, env: str, detail: str) -> None:
    with httpx.Client(base_url=url) as c:
        h = {"X-Session-ID": uuid.uuid4().hex}
        r = c.post("/create", headers=h, json={"env_name": env, "split": "test", "index": 0})
        assert r.status_code == 200
        for route in ("prompt", "messages"):  # the spec's fault: 503, never a 500
            r = c.get(f"/{env}/{route}", headers=h)
            assert (r.status_code, r.headers["retry-after"]) == (503, "5")
            assert r.json() == {
                "detail": f"the environment cannot render this task's prompt: {detail}. Its spec is at "
                "fault, not the request: retry later, or skip the task"
            }
        # The same server, the next requests: still serving, the session still works.
        assert c.get("/health").status_code == 200
        assert c.post("/ping", headers=h).json() == {"status": "ok"}
        other = {"X-Session-ID": uuid.uuid4().hex}
        r = c.post("/create", headers=other, json={"env_name": "digits", "split": "test", "index": 0})
        assert r.status_code == 200
        assert c.get("/digits/prompt", headers=other).json()[1]["type"] == "text"


def test_bad_conversation_sent_by_a_client_is_a_json_error(url: str) -> None:
    with httpx.Client(base_url=url) as c:
        h = {"X-Session-ID": uuid.uuid4().hex}
        bad = {
            "id": "x",
            "answer": "x",
            "conversation": [
                {"role": "assistant", "blocks": [{"type": "tool_result", "tool_call_id": "1", "blocks": []}]}
            ],
        }
        assert c.post("/create", headers=h, json={"env_name": "rich", "task_spec": bad}).status_code == 200
        r = c.get("/rich/messages", headers=h)
        assert r.status_code == 422  # the client's own task: its fault
        assert r.json()["detail"].startswith(
            "the task_spec this session was created with cannot be rendered: "
            "conversation[0]: A 'tool_result' block is not valid in a 'assistant' message"
        )
        assert c.get("/rich/messages", headers=h).status_code == 422  # and again: no crash, no state


def test_tools_listing_advertises_rich_blocks(url: str) -> None:
    listing = httpx.get(f"{url}/hh_rlhf/tools").json()
    assert listing["message_block_types"] == ["text", "image", "reasoning", "tool_call", "tool_result"]
