"""A package adds a tool type (and a grader) through entry points, with no code in the spec.

The plugin is "installed" the way pip leaves a package: its module and a ``*.dist-info`` with
``entry_points.txt`` on ``sys.path``. A fresh interpreter then sees it, as a user's would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT

PLUGIN = '''
from typing import Literal

from envbuilder.graders import Grade, Grader, GraderConfig
from envbuilder.tools import Tool, ToolConfig, ToolReply
from envbuilder.errors import ToolError


class ShoutConfig(ToolConfig):
    """Repeat the input in capitals."""

    type: Literal["shout"]
    times: int = 1


class ShoutTool(Tool):
    Config = ShoutConfig
    description = "Shout the text."
    reads_input = frozenset({"text"})

    async def run(self, call):
        if call.args["text"] == "boom":
            raise ToolError("too loud")
        call.state["shouts"] = call.state.get("shouts", 0) + 1
        return ToolReply.text(" ".join([call.args["text"].upper()] * self.config.times))


class LengthConfig(GraderConfig):
    type: Literal["length_at_least"]
    chars: int


class LengthGrader(Grader):
    Config = LengthConfig

    async def grade(self, answer, task, secrets):
        ok = len(answer) >= self.config.chars
        return Grade.correct() if ok else Grade.incorrect()
'''

ENTRY_POINTS = """
[envbuilder.tools]
shout = eb_shout:ShoutTool

[envbuilder.graders]
length_at_least = eb_shout:LengthGrader
"""

SPEC = f"""
name: shouting
dataset:
  type: parquet
  files: {{test: {ROOT / "tests/cli/invalid/data/tiny.parquet"}}}
splits:
  test: {{}}
prompt:
  template: "{{{{ question }}}}"
grader: {{type: length_at_least, chars: 5}}
tools:
  - type: shout
    times: 2
    input:
      text: {{type: string, description: What to shout., max_length: 20}}
"""

SCRIPT = """
import asyncio, json, sys
from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.spec import parse_spec, json_schema

env = Environment(parse_spec(sys.stdin.read(), file="shouting.yaml"))
episode = Episode(task=env.split("test").task(0))

async def main():
    out = []
    calls = [("shout", {"text": "hi"}), ("shout", {"text": "boom"}), ("submit", {"answer": "long enough"})]
    for name, args in calls:
        out.append((await env.call_tool(episode, name, args)).model_dump())
    return out

results = asyncio.run(main())
schema = json.dumps(json_schema())
print(json.dumps({"results": results, "state": episode.tool_state,
                  "in_schema": ["ShoutConfig" in schema, "LengthConfig" in schema],
                  "tools": [t.model_dump() for t in env.tools_listing.tools]}))
"""


def _install(site: Path) -> None:
    (site / "eb_shout.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "eb_shout-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eb-shout\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)


def test_a_plugin_package_adds_a_tool_type_and_a_grader(tmp_path: Path) -> None:
    _install(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=SPEC, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    shout, boom, submit = data["results"]
    assert shout["output"]["blocks"][0]["text"] == "HI HI"
    assert boom["output"]["blocks"][0]["text"] == "Error: 'shout' failed: too loud"
    assert (submit["output"]["reward"], submit["output"]["finished"]) == (1.0, True)
    assert data["state"] == {"shout": {"shouts": 1}}
    assert data["in_schema"] == [True, True]
    assert data["tools"][1] == {
        "name": "shout",
        "description": "Shout the text.",
        "input_schema": {
            "additionalProperties": False,
            "properties": {
                "text": {"description": "What to shout.", "maxLength": 20, "title": "Text", "type": "string"}
            },
            "required": ["text"],
            "title": "shout_input",
            "type": "object",
        },
    }


def test_without_the_plugin_the_type_is_unknown(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=SPEC, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1
    assert "grader.type: unknown type 'length_at_least'" in done.stderr
    assert "tools[0].type: unknown type 'shout'" in done.stderr
