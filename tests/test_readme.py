"""The README's first screen tells the truth: its commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from envbuilder import __version__
from envbuilder.cli import app

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_has_install_serve_and_test_commands() -> None:
    assert "$ pip install -e . && envbuilder serve envs/gsm8k.yaml" in README
    assert re.search(r"^\$ pip install -e '\.\[dev\]' && python -m pytest$", README, re.M)


def test_readme_serve_output_matches_the_cli(gsm8k) -> None:
    assert f"envbuilder: serving gsm8k ({gsm8k.summary()} tasks)" in README


def test_version_flag() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"envbuilder {__version__}"


def test_serve_bad_spec_exits_1_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    result = CliRunner().invoke(app, ["serve", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "missing required key 'dataset'" in result.output


def test_readme_prompt_examples_are_valid_specs() -> None:
    import yaml

    from envbuilder.spec import PromptSpec

    section = README.split("## Prompts and conversations", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert len(blocks) == 3
    for block in blocks:
        PromptSpec.model_validate(yaml.safe_load(block)["prompt"])
