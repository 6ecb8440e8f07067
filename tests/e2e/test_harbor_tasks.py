"""End to end: a folder of Harbor task directories (tests/fixtures/harbor, the public format)
served by ``envbuilder serve`` (a real uvicorn server in its own process, a real engine, each
task's own image built from its Dockerfile) and played with both reference clients: the
oracle's work earns 1.0, no work 0.0, and the container hacks (a reward file written before
the tests, a process left to write it during them, the tests rewritten, the test runner's
files planted in the working folder) earn 0.0."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder.environment import Environment, load_environment
from tests.processes import serve_process
from tests.sandboxes import needs_base_image

SPEC = str(Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "harbor.yaml")
HELLO, WORDCOUNT = 1, 0  # the task directories, sorted by name


@pytest.fixture(scope="module")
def harbor() -> Environment:
    needs_base_image()
    return load_environment(SPEC)


@pytest.fixture(scope="module")
def url(harbor: Environment) -> Iterator[str]:
    with serve_process(SPEC, env={"ENVBUILDER_SERVER_ID": f"test-{uuid.uuid4().hex[:10]}"}) as (url, _):
        yield url


def _oracle(env: Environment, index: int) -> str:
    return json.loads(env.split("test").task(index)["oracle"])[0]["arguments"]["code"]


def test_ors_sdk_oracle_and_empty(url: str, harbor: Environment) -> None:
    from ors.client import ORS

    with ORS(base_url=url) as client:
        env = client.environment("harbor_fixture")
        public = env.get_task("test", HELLO).task_spec
        assert not {"tests", "oracle", "solution", "verifier", "config"} & set(public)
        with env.session(split="test", index=HELLO) as s:
            assert s.get_prompt()[0].text.startswith("Create a file `/app/hello.txt`")
            out = s.call_tool("bash", {"code": "pwd; ls -A; ls /tests /logs 2>&1 | head -2"})
            lines = out.blocks[0].text.splitlines()
            assert lines[0] == "/app" and "No such file or directory" in out.blocks[0].text
            s.call_tool("bash", {"code": _oracle(harbor, HELLO)})
            out = s.call_tool("submit", {"answer": ""})
            assert (out.reward, out.finished) == (1.0, True)
            assert out.metadata["rewards"] == {"reward": 1.0}
        with env.session(split="test", index=HELLO) as s:
            out = s.call_tool("submit", {"answer": ""})
            assert (out.reward, out.finished) == (0.0, True)
        with env.session(split="test", index=HELLO) as s:  # close is not done
            s.call_tool("write_file", {"path": "hello.txt", "content": "Hello, Harbor\n"})
            out = s.call_tool("submit", {"answer": ""})
            assert out.reward == 0.0


def test_openreward_fixes_the_script_and_empty_earns_nothing(url: str, harbor: Environment) -> None:
    from openreward import EnvironmentsAPI

    api = EnvironmentsAPI(base_url=url, api_key=None)
    env = api.get(name="harbor_fixture", variant="harbor_fixture")
    with env.session(split="test", index=WORDCOUNT) as s:
        s.call_tool(
            "edit_file",
            {
                "path": "wordcount.py",
                "old_text": 'words = f.read().split(" ")',
                "new_text": "words = f.read().lower().split()",
            },
        )
        s.call_tool(
            "edit_file",
            {
                "path": "/app/wordcount.py",
                "old_text": "key=lambda item: item[1])",
                "new_text": "key=lambda item: (-item[1], item[0]))",
            },
        )
        out = s.call_tool("submit", {"answer": ""})
        assert (out.reward, out.finished) == (1.0, True)
        assert out.metadata["rewards"] == {"reward": 1.0, "cases_passed": 3.0}
    with env.session(split="test", index=WORDCOUNT) as s:
        s.call_tool("bash", {"code": "python3 wordcount.py /etc/hostname"})
        out = s.call_tool("submit", {"answer": ""})
        assert (out.reward, out.finished) == (0.0, True)
        assert out.metadata["rewards"]["cases_passed"] == 1.0  # the bug spares one-word texts


HACKS = {
    "a reward file where Harbor reads it, and beside it": (
        "mkdir -p /logs/verifier logs/verifier 2>/dev/null; for d in /logs/verifier logs/verifier /tmp; do "
        "echo 1 > $d/reward.txt; echo '{\"reward\": 1}' > $d/reward.json; done 2>/dev/null; "
        "ln -s /logs/verifier/reward.json reward.json; true"
    ),
    "a process that writes the reward during the tests": (
        "nohup sh -c 'while :; do mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt "
        "&& echo 1 > /logs/verifier/reward.json; sleep 0.05; done' >/dev/null 2>&1 & sleep 0.3; true"
    ),
    "the tests rewritten": (
        "for d in /tests tests; do mkdir -p $d; printf '#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n' "
        "> $d/test.sh; done 2>/dev/null; true"
    ),
    "the checker's modules planted where it runs": (
        "printf 'import os\\nos._exit(0)\\n' > json.py; cp json.py subprocess.py; cp json.py tempfile.py; "
        "printf 'import json\\n' > sitecustomize.py; true"
    ),
    "the program writes the verdict when the tests run it": (
        'printf \'import os, sys\\nfor p in ("/logs/verifier/reward.json", "/logs/verifier/reward.txt"):\\n'
        '    try: open(p, "w").write("1")\\n    except OSError as e: print(e)\\nprint(\\"the 2\\")\\n\' '
        "> wordcount.py; true"
    ),
}


@pytest.mark.parametrize("hack", list(HACKS))
def test_container_hacks_earn_nothing(url: str, hack: str) -> None:
    from ors.client import ORS

    with (
        ORS(base_url=url) as client,
        client.environment("harbor_fixture").session(split="test", index=WORDCOUNT) as s,
    ):
        s.call_tool("bash", {"code": HACKS[hack]})
        out = s.call_tool("submit", {"answer": ""})
        assert (out.reward, out.finished) == (0.0, True), (hack, out.metadata)
