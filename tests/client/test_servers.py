"""End to end: envbuilder's client against envbuilder's server and both reference servers,
with the checks tests/e2e gives the reference clients."""

import asyncio
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from envbuilder.client import (
    AsyncClient,
    Client,
    NotFound,
    SessionGone,
    ToolFailed,
    ToolInputInvalid,
    ToolNotFound,
)
from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app
from tests.servers import serve_app

TASKS = [
    {"id": "m0", "question": "What is 2+2?", "answer": "4"},
    {"id": "m1", "question": "What is 3*3?", "answer": "9"},
    {"id": "m2", "question": "What is 10-7?", "answer": "3"},
]


def _gold(gsm8k: Environment, split: str, index: int) -> str:
    return gsm8k.split(split).task(index)["answer"].split("####")[-1].strip()


# -- envbuilder's server ---------------------------------------------------------------------


@pytest.fixture
def client(gsm8k_url: str):
    with Client(gsm8k_url) as c:
        yield c


def test_discovery(client: Client, gsm8k: Environment) -> None:
    assert client.list_environments() == ["gsm8k"]
    env = client.environment("gsm8k")
    assert [s.name for s in env.list_splits()] == ["train", "test"]
    assert (env.num_tasks("train"), env.num_tasks("test")) == (7473, 1319)
    tools = env.list_tools()
    assert [t.name for t in tools] == ["submit"]
    assert tools[0].input_schema["properties"]["answer"]["type"] == "string"
    assert env.list_tools(format="openai")[0]["name"] == "submit"
    assert env.list_tools(format="anthropic")[0]["input_schema"]["required"] == ["answer"]
    assert env.task("test", 5) == gsm8k.public(gsm8k.split("test").task(5))
    assert env.task("test", -1) == gsm8k.public(gsm8k.split("test").task(1318))
    assert [t["id"] for t in env.task_range("train", start=-2)] == ["train-7471", "train-7472"]
    assert len(env.task_range("train", 0, 3)) == 3
    assert len(env.list_tasks("test")) == 1319
    assert client.environment().name == "gsm8k"  # the default environment
    with pytest.raises(NotFound, match="Invalid split"):
        env.num_tasks("nope")
    with pytest.raises(NotFound, match="Invalid index"):
        env.task("test", 10**6)


def test_episode_by_split_index(client: Client, gsm8k: Environment) -> None:
    env = client.environment("gsm8k")
    with env.session(split="test", index=7) as s:
        msgs = s.get_messages()
        assert len(msgs) == 1 and msgs[0].role == "user"
        assert gsm8k.split("test").task(7)["question"] in msgs[0].blocks[0].text
        assert s.prompt()[0].text == msgs[0].blocks[0].text
        assert s.get_messages("openai")[0]["role"] == "user"
        assert s.get_messages("anthropic")["system"] is None
        assert [t.name for t in s.list_tools()] == ["submit"]
        with pytest.raises(ToolNotFound) as info:
            s.call_tool("nope", {})
        assert info.value.reason == "not_found"
        with pytest.raises(ToolInputInvalid):
            s.call_tool("submit", {"wrong": 1})
        out = s.call_tool("submit", {"answer": f"**{_gold(gsm8k, 'test', 7)}**"})
        assert (out.reward, out.finished, out.metadata["outcome"]) == (1.0, True, "correct")
        assert s.finished and s.reward == 1.0
        after = s.call_tool("submit", {"answer": "1"})  # a state, not an error: not run, no reward
        assert (after.finished, after.reward, after.metadata) == (True, None, {"not_run": "episode_finished"})


def test_episode_by_task_wrong_answer_and_secrets(client: Client) -> None:
    env = client.environment("gsm8k")
    task = env.task("test", 0)
    with env.session(task, secrets={"OPENAI_API_KEY": "sk-test-not-logged"}) as s:
        out = s.call_tool("submit", {"answer": "-123456"})
        assert (out.reward, out.finished) == (0.0, True)
        assert "sk-test" not in out.model_dump_json()


def test_large_tool_results_are_reassembled(client: Client) -> None:
    name = "x " * 3000  # echoed in the error: a > 4 KB result cut into chunks
    with (
        client.environment("gsm8k").session(split="train", index=0) as s,
        pytest.raises(ToolNotFound) as info,
    ):
        s.call_tool(name, {})
    assert name in info.value.error


async def test_sessions_are_pinged_and_deleted(gsm8k: Environment) -> None:
    app = create_app([gsm8k], ServerSettings())
    seen: list[str] = []

    async def log(request: httpx.Request) -> None:
        seen.append(request.url.path)

    with serve_app(app) as url:
        async with AsyncClient(url, ping_interval=0.05) as c:
            c.http._client.event_hooks["request"].append(log)
            async with c.environment("gsm8k").session(split="train", index=1) as s:
                assert len(app.state.context.sessions) == 1
                await asyncio.sleep(0.3)
                await s.prompt()
            assert len(app.state.context.sessions) == 0
            with pytest.raises(SessionGone):
                await s.prompt()
    assert seen[:3] == ["/create_session", "/create", "/ping"]
    assert seen.count("/ping") >= 3
    assert seen[-2:] == ["/delete", "/delete_session"]


async def test_a_deleted_session_is_gone(gsm8k_url: str) -> None:
    async with AsyncClient(gsm8k_url) as c, c.environment("gsm8k").session(split="train", index=0) as s:
        await c.http.request("POST", "/delete", sid=s.sid)
        with pytest.raises(SessionGone, match="Active environment not found"):
            await s.call_tool("submit", {"answer": "1"})
        assert s.gone


# -- reference servers ---------------------------------------------------------------------------


class Answer(BaseModel):
    answer: str


class Text(BaseModel):
    text: str


def _ors_env():
    import ors

    class MathEnv(ors.Environment):
        def get_prompt(self):
            return [ors.TextBlock(text=self.task_spec["question"])]

        @classmethod
        def list_tasks(cls, split: str):
            if split != "train":
                raise ValueError("Invalid split")
            return TASKS

        @classmethod
        def list_splits(cls):
            return ["train"]

        @ors.tool
        def submit(self, params: Answer) -> ors.ToolOutput:
            """Submit the final answer."""
            ok = params.answer.strip() == self.task_spec["answer"]
            return ors.ToolOutput(
                blocks=[ors.TextBlock(text="Correct!" if ok else "Wrong.")],
                metadata={"ok": ok},
                reward=1.0 if ok else 0.0,
                finished=True,
            )

        @ors.tool
        def echo(self, params: Text) -> ors.ToolOutput:
            """Echo the text."""
            return ors.ToolOutput(blocks=[ors.TextBlock(text=params.text)], finished=False)

        @ors.tool
        def boom(self) -> ors.ToolOutput:
            """Raise."""
            raise RuntimeError("kaboom from boom()")

    return ors.Server([MathEnv]).app


def _openreward_envs():
    from openreward.environments import (
        Environment,
        Message,
        ReasoningBlock,
        Server,
        TextBlock,
        ToolCallBlock,
        ToolOutput,
        ToolResultBlock,
        tool,
    )

    class MathEnv(Environment):
        def get_prompt(self):
            return [TextBlock(text=self.task_spec["question"])]

        @classmethod
        def list_tasks(cls, split: str):
            return TASKS

        @classmethod
        def list_splits(cls):
            return ["train"]

        @tool
        def submit(self, params: Answer) -> ToolOutput:
            """Submit the final answer."""
            ok = params.answer.strip() == self.task_spec["answer"]
            return ToolOutput(blocks=[TextBlock(text="ok" if ok else "no")], reward=float(ok), finished=True)

        @tool
        def echo(self, params: Text) -> ToolOutput:
            """Echo the text."""
            return ToolOutput(blocks=[TextBlock(text=params.text)], finished=False)

    class ConvEnv(MathEnv):
        def get_messages(self):
            return [
                Message(role="system", blocks=[TextBlock(text="You are a careful assistant.")]),
                Message(role="user", blocks=[TextBlock(text="What is 6*7? Use the calculator.")]),
                Message(
                    role="assistant",
                    blocks=[
                        ReasoningBlock(text="I should call the calculator."),
                        TextBlock(text="Let me compute that."),
                        ToolCallBlock(id="call_1", name="calculator", input={"expr": "6*7"}),
                    ],
                ),
                Message(
                    role="user",
                    blocks=[
                        ToolResultBlock(tool_call_id="call_1", blocks=[TextBlock(text="42")]),
                        TextBlock(text="Now give the final answer."),
                    ],
                ),
            ]

    return Server([MathEnv, ConvEnv]).app


@pytest.fixture(scope="module")
def ors_url():
    with serve_app(_ors_env()) as url:
        yield url


@pytest.fixture(scope="module")
def openreward_url():
    with serve_app(_openreward_envs()) as url:
        yield url


def _common_checks(url: str, env_name: str) -> dict[str, Any]:
    with Client(url) as c:
        assert env_name in c.list_environments()
        env = c.environment(env_name)
        assert [s.name for s in env.list_splits()] == ["train"]
        assert env.num_tasks("train") == 3
        assert env.task("train", 1) == TASKS[1]  # ors-sdk sends no env_name here: not needed
        assert env.task_range("train", -2, -1) == [TASKS[1]]
        assert env.list_tasks("train") == TASKS
        assert "submit" in [t.name for t in env.list_tools()]
        assert env.list_tools("google")[0]["name"]
        with env.session(split="train", index=0) as s:
            prompt = s.prompt()
            assert prompt[0].text == "What is 2+2?"
            messages = s.get_messages("openai")
            assert messages == [{"role": "user", "content": "What is 2+2?"}]
            assert "submit" in [t.name for t in s.list_tools()]
            big = "é " * 3000 + " leading"  # > 4 KB: chunked, maybe at a space
            assert s.call_tool("echo", {"text": big}).blocks[0].text == big
            with pytest.raises(ToolNotFound):
                s.call_tool("nope", {})
            with pytest.raises(ToolInputInvalid):
                s.call_tool("submit", {"wrong": 1})
            out = s.call_tool("submit", {"answer": "4"})
            assert (out.reward, out.finished) == (1.0, True)
            assert s.finished and s.reward == 1.0
            finished_again = s.call_tool("submit", {"answer": "4"})  # not sent: the session knows
        with env.session(TASKS[2]) as s:
            assert s.call_tool("submit", {"answer": "0"}).reward == 0.0
        return {"after_finish": finished_again}


def test_ors_reference_server(ors_url: str) -> None:
    result = _common_checks(ors_url, "mathenv")
    assert result["after_finish"].reward is None  # ors-sdk has no finished latch; the client has
    with Client(ors_url) as c, c.environment("mathenv").session(split="train", index=0) as s:
        with pytest.raises(ToolFailed, match="kaboom from boom"):
            s.call_tool("boom", {})
        assert s.call_tool("echo", {"text": "still usable"}).blocks[0].text == "still usable"


def test_openreward_reference_server(openreward_url: str) -> None:
    result = _common_checks(openreward_url, "mathenv")
    assert result["after_finish"].metadata == {"not_run": "episode_finished"}


def test_openreward_conversation_formats(openreward_url: str) -> None:
    with Client(openreward_url) as c, c.environment("convenv").session(split="train", index=0) as s:
        raw = s.get_messages()
        assert [m.role for m in raw] == ["system", "user", "assistant", "user"]
        assert [b.type for b in raw[2].blocks] == ["reasoning", "text", "tool_call"]
        openai = s.get_messages("openai")
        assert openai[2]["reasoning_content"] == "I should call the calculator."
        assert openai[3] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
        assert s.get_messages("anthropic")["system"] == "You are a careful assistant."
        with pytest.raises(ValueError, match="reasoning"):
            s.get_messages("google")
