"""The how-to guides' and the training tutorial's examples work as shown (the examples that moved
from the README; their assertions are the README tests' own)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import ENVS, ROOT
from tests.docs.pages import blocks, page, section


def test_prompt_examples_are_valid_specs() -> None:
    from envbuilder.spec import PromptSpec

    examples = blocks(page("how-to/prompts.md"), "yaml")
    assert len(examples) == 3
    for block in examples:
        PromptSpec.model_validate(yaml.safe_load(block)["prompt"])


def test_generated_spec_serves_and_grades(tmp_path: Path) -> None:
    pytest.importorskip("reasoning_gym")
    from envbuilder.environment import Environment
    from envbuilder.spec import parse_spec

    block = blocks(page("how-to/generated-tasks.md"), "yaml")[0]
    env = Environment(parse_spec(block, file="reasoning.yaml", base_dir=tmp_path))
    assert len(env.split("train")) == 10**9 - 1000
    task = env.split("test").task(3)
    assert task["difficulty"] == "hard" and task["family"] in {"chain_sum", "spell_backward"}
    assert env.submit is not None
    grade = asyncio.run(env.submit.grader.grade(task["answer"], task, {}))
    assert grade.score == 1.0


def test_train_with_sections_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "Train with" section's Python runs as shown (from the repository's root) and prints
    what its comments say."""
    monkeypatch.chdir(ROOT)
    sections = page("tutorials/training.md").split("\n## Train with ")[1:]
    ran = 0
    for text in sections:
        text = text.split("\n## ", 1)[0]
        for block in blocks(text, "python"):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, f"docs: Train with {text.split()[0]}", "exec"), {})
            expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)[ \t]+# (.+)$", block, re.M)]
            printed = out.getvalue().splitlines()
            for want in expected:
                assert any(line.strip() == want for line in printed), (want, printed)
            ran += 1
    assert ran == 5


def test_agent_example_is_a_valid_spec_over_the_shipped_data() -> None:
    from envbuilder.environment import Environment
    from envbuilder.spec import parse_spec

    block = blocks(section(page("how-to/agents.md"), "# Agents"), "yaml")[0]  # the page's first example
    spec = yaml.safe_load((ENVS / "tau2_retail.yaml").read_text())
    spec.update(yaml.safe_load(block))
    env = Environment(parse_spec(yaml.safe_dump(spec), file="docs.yaml", base_dir=ENVS))
    assert [t.name for t in env.tools_listing.tools] == [
        "send_message",
        "get_order_details",
        "exchange_delivered_order_items",
    ]
    assert env.document is not None and env.submit is not None and env.submit.user is not None


def test_the_declarative_cancel_on_the_tools_page_does_what_the_shipped_one_does() -> None:
    from envbuilder.environment import Environment, Episode
    from envbuilder.protocol import RunToolSuccess
    from envbuilder.spec import parse_spec

    (block, _) = blocks(section(page("how-to/tools.md"), "## Declarative tools"), "yaml")
    (shown,) = yaml.safe_load(block)["tools"]
    shipped = yaml.safe_load((ENVS / "tau2_retail.yaml").read_text())
    documented = dict(
        shipped, tools=[shown if t.get("name") == shown["name"] else t for t in shipped["tools"]]
    )
    envs = [
        Environment(parse_spec(yaml.safe_dump(s), file="docs.yaml", base_dir=ENVS))
        for s in (shipped, documented)
    ]
    pending = next(k for k, o in envs[0].document.data["orders"].items() if o["status"] == "pending")  # type: ignore[union-attr]

    async def cancel(env: Environment) -> tuple[str, object]:
        episode = Episode(task=env.split("test").task(0))
        result = await env.call_tool(
            episode, "cancel_pending_order", {"order_id": pending, "reason": "ordered by mistake"}
        )
        assert isinstance(result, RunToolSuccess)
        return result.output.blocks[0].text, episode.state  # type: ignore[union-attr]

    (text, state), (doc_text, doc_state) = (asyncio.run(cancel(env)) for env in envs)
    assert doc_state == state and doc_text == text and '"status":"cancelled"' in text


def test_the_graders_page_shows_the_committed_fidelity_card() -> None:
    from envbuilder.graders._fidelity import card, markdown_table

    shown = section(page("how-to/graders.md"), "### Fidelity card")
    assert markdown_table(card()) in shown
    assert "fidelity.json" in shown and "bench/grader_accuracy.py --card" in shown
