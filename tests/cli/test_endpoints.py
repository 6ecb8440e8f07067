"""Model endpoints without editing specs: the simulated user's and the judge's base URL, model and
key from `serve`/`eval`/`check` flags and environment variables (flag > variable > spec), shown at
start-up without the key; `--no-cache`; and `envbuilder cache show|clear`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.llm import ENDPOINT_VARIABLES, open_cache
from tests.conftest import ENVS
from tests.fakes.chat_server import ChatServer, reply
from tests.servers import free_port

runner = CliRunner()
USER_KEY = "sk-operator-user-key-1"


@pytest.fixture(autouse=True)
def _no_endpoint_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without the variables, and whatever a command sets is undone after."""
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str, ChatServer]]:
    """`envbuilder serve envs/phone_support.yaml` in a subprocess with the customer pointed at a
    local chat server by flags (and a model variable the flag must win over)."""
    with ChatServer(lambda body, i: (200, reply("Hi, my phone has no signal."), {})) as chat:
        port = free_port()
        env = {**os.environ, "MY_USER_KEY": USER_KEY, "ENVBUILDER_USER_MODEL": "model-from-variable"}
        argv = [
            sys.executable,
            "-m",
            "envbuilder",
            "serve",
            str(ENVS / "phone_support.yaml"),
            "--port",
            str(port),
        ]
        argv += ["--user-base-url", chat.base_url, "--user-model", "model-from-flag"]
        argv += ["--user-api-key-env", "MY_USER_KEY"]
        server = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            lines: list[str] = []
            assert server.stdout is not None
            deadline = time.monotonic() + 60
            while not any("listening on" in line for line in lines):
                assert time.monotonic() < deadline and server.poll() is None, lines
                lines.append(server.stdout.readline())
            yield f"http://127.0.0.1:{port}", "".join(lines), chat
        finally:
            server.terminate()
            server.wait(timeout=20)
            if server.stdout is not None:
                server.stdout.close()


def test_serve_points_the_user_elsewhere_by_flag_and_says_so_without_the_key(
    served: tuple[str, str, ChatServer],
) -> None:
    from ors.client import ORS

    url, output, chat = served
    assert (
        f"envbuilder: phone_support: simulated user (user) model-from-flag [--user-model] at {chat.base_url} "
        "[--user-base-url], key: $ENVBUILDER_USER_API_KEY (from --user-api-key-env), reply cache on\n"
    ) in output
    assert USER_KEY not in output
    with ORS(base_url=url) as client:
        env = client.environment("phone_support")
        with env.session(split="test", index=0, secrets={"OPENAI_API_KEY": "sk-client-key"}) as s:
            out = s.call_tool("send_message", {"message": "Hello, override test."})
            assert out.blocks[0].text == "Hi, my phone has no signal."
    assert chat.requests[-1]["model"] == "model-from-flag"
    # The operator's key is used for every session; the client's secret does not leave the server.
    assert chat.headers_seen[-1]["authorization"] == f"Bearer {USER_KEY}"


def test_a_variable_overrides_the_judge_and_the_spec_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILDER_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    result = runner.invoke(app, ["check", str(ENVS / "mt_bench.yaml"), "--sample", "0", "--no-cache"])
    assert (
        "mt_bench: judge (grader) gpt-4o-mini [spec] at http://127.0.0.1:9/v1 [$ENVBUILDER_JUDGE_BASE_URL], "
        "key: the session's OPENAI_API_KEY secret, reply cache off\n"
    ) in result.output


def test_the_spec_alone_is_shown_as_the_spec() -> None:
    result = runner.invoke(app, ["check", str(ENVS / "phone_support.yaml"), "--sample", "1"])
    assert result.exit_code == 0, result.output
    assert (
        "phone_support: simulated user (user) gpt-4.1-mini [spec] at https://api.openai.com/v1 [spec], "
        "key: the session's OPENAI_API_KEY secret, reply cache on\n"
    ) in result.output


def test_a_bad_override_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILDER_USER_BASE_URL", "ftp://example.com")
    result = runner.invoke(app, ["check", str(ENVS / "phone_support.yaml")])
    assert result.exit_code == 1
    assert (
        "ENVBUILDER_USER_BASE_URL must start with http:// or https:// (got 'ftp://example.com')"
        in result.output
    )
    assert "Traceback" not in result.output
    monkeypatch.delenv("ENVBUILDER_USER_BASE_URL")
    result = runner.invoke(
        app, ["check", str(ENVS / "phone_support.yaml"), "--user-api-key-env", "NOT_SET_X"]
    )
    assert result.exit_code == 2
    assert result.output == "error: --user-api-key-env NOT_SET_X: the variable NOT_SET_X is not set\n"


def test_cache_show_and_clear(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("ENVBUILDER_CACHE_DIR", str(tmp_path))
    assert runner.invoke(app, ["cache", "show"]).output == f"{tmp_path}/judge-cache.sqlite3: no cache yet\n"
    cache = open_cache(tmp_path)
    for i in range(3):
        cache.put_sync(f"key-{i}", f"reply {i}")
    shown = runner.invoke(app, ["cache", "show"]).output
    assert shown.startswith(f"{tmp_path}/judge-cache.sqlite3: 3 replies, ")
    cleared = runner.invoke(app, ["cache", "clear"])
    assert (cleared.exit_code, cleared.output) == (0, f"{tmp_path}/judge-cache.sqlite3: 3 replies deleted\n")
    assert cache.get_sync("key-0") is None and cache.count() == 0


def _agent(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A scripted agent for phone_support's first task: tells the customer to turn airplane
    mode off, then closes."""
    from tests.fakes.chat_server import tool_call_reply

    results = sum(1 for m in body["messages"] if m["role"] == "tool")
    said = ["Please turn airplane mode off.", "Is there anything else I can help you with?"]
    if results < len(said):
        return 200, tool_call_reply("send_message", json.dumps({"message": said[results]}), f"a{results}"), {}
    return 200, reply("Done."), {}


def test_eval_plays_dual_control_with_the_customer_pointed_elsewhere_by_flag(tmp_path: Any) -> None:
    from tests.fakes import phone_customer

    with ChatServer(_agent) as agent, ChatServer(phone_customer.customer) as customer:
        out = tmp_path / "run.jsonl"
        argv = ["eval", str(ENVS / "phone_support.yaml"), "--model", "scripted", "--base-url", agent.base_url]
        argv += ["--limit", "1", "--out", str(out), "--user-base-url", customer.base_url, "--no-cache"]
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, result.output
        assert f"at {customer.base_url} [--user-base-url]" in result.output
        assert len(customer.requests) == 4  # the guidance (setting, status bar, reply), the goodbye
    records = [json.loads(line) for line in out.read_text().splitlines()]
    episode = [r for r in records if r.get("reward") is not None]
    assert [r["reward"] for r in episode] == [1.0]
    assert "--user-base-url" in out.read_text() and "--no-cache" in out.read_text()


BAD_URLS = [  # no scheme, no host, another scheme, a port that is not a number
    "notaurl",
    "localhost:8000/v1",
    "http://",
    "http:///v1",
    "ftp://example.com/v1",
    "http://h:x/v1",
]


@pytest.mark.parametrize("url", BAD_URLS)
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(
            ["eval", str(ENVS / "gsm8k.yaml"), "--model", "m", "--base-url", "{url}", "--limit", "2"],
            id="eval",
        ),
        pytest.param(
            [
                "eval",
                str(ENVS / "gsm8k.yaml"),
                "--model",
                "m",
                "--base-url",
                "{good}",
                "--judge-base-url",
                "{url}",
                "--limit",
                "2",
            ],
            id="eval-judge",
        ),
        pytest.param(
            [
                "eval",
                str(ENVS / "gsm8k.yaml"),
                "--model",
                "m",
                "--base-url",
                "{good}",
                "--user-base-url",
                "{url}",
                "--limit",
                "2",
            ],
            id="eval-user",
        ),
        pytest.param(
            ["profile", str(ENVS / "gsm8k.yaml"), "--model", "m", "--base-url", "{url}", "--limit", "2"],
            id="profile",
        ),
        pytest.param(
            ["check", str(ENVS / "phone_support.yaml"), "--user-base-url", "{url}"], id="check-user"
        ),
        # refused before the spec is read (an old serve would report the spec, or serve it)
        pytest.param(["serve", "no-such-spec.yaml", "--judge-base-url", "{url}"], id="serve-judge"),
    ],
)
def test_an_endpoint_url_that_is_not_one_is_a_usage_error(command: list[str], url: str) -> None:
    """Before anything runs (no request reaches the good endpoint), exit 2, naming the option."""
    with ChatServer(lambda body, i: (200, reply("hi"), {})) as chat:
        args = [a.replace("{url}", url).replace("{good}", chat.base_url) for a in command]
        result = runner.invoke(app, args, env={"COLUMNS": "400"})  # the error's box on one line
    assert result.exit_code == 2, result.output
    option = args[args.index(url) - 1]
    assert f"Invalid value for '{option}'" in " ".join(result.output.split())
    assert "Traceback" not in result.output and chat.requests == []


@pytest.mark.parametrize("url", ["http://", "http:///x", "https://:8080"])
def test_a_server_url_without_a_host_is_a_usage_error(url: str) -> None:
    result = runner.invoke(app, ["eval", url, "--model", "m", "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for 'SPEC_OR_URL'" in result.output and "has no host" in result.output


def test_an_override_without_a_host_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVBUILDER_USER_BASE_URL", "http:///v1")
    result = runner.invoke(app, ["check", str(ENVS / "phone_support.yaml")])
    assert result.exit_code == 1
    assert "ENVBUILDER_USER_BASE_URL has no host (got 'http:///v1')" in result.output
