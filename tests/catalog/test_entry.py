"""Catalog entries and ``GET /catalog``: the fields, the content hash, the sample conversation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from envbuilder.catalog import build_catalog, catalog_entry
from envbuilder.cli import app
from envbuilder.environment import Environment, load_environment
from envbuilder.protocol import ImageBlock, Message, TextBlock
from envbuilder.server import create_app
from envbuilder.templating import templates_dir
from tests.conftest import ENVS

ENTRY_KEYS = [
    "name", "title", "description", "tags", "license", "citation", "version", "spec", "content_hash",
    "files", "dataset", "splits", "tools", "graders", "hacks_audit", "fidelity", "sample",
]  # fmt: skip


def test_gsm8k_entry(gsm8k: Environment) -> None:
    entry = catalog_entry(gsm8k)
    assert list(entry) == ENTRY_KEYS
    assert [entry[k] for k in ("name", "title", "license", "version")] == ["gsm8k", "GSM8K", "MIT", "1"]
    assert entry["tags"] == ["math", "arithmetic", "word-problems"]
    assert entry["citation"].startswith("Cobbe et al. (2021)")
    assert entry["dataset"] == {
        "type": "parquet",
        "files": {
            "train": "data/gsm8k/train-00000-of-00001.parquet",
            "test": "data/gsm8k/test-00000-of-00001.parquet",
        },
    }
    assert entry["splits"] == [
        {"name": "train", "type": "train", "num_tasks": 7473},
        {"name": "test", "type": "test", "num_tasks": 1319},
    ]
    assert [t["name"] for t in entry["tools"]] == ["submit"]
    assert entry["tools"][0]["input_schema"]["required"] == ["answer"]
    assert entry["graders"] == [
        {
            "type": "exact_match",
            "target": "{{ answer.split('####')[-1] }}",
            "extract": "number",
            "normalize": ["strip", "whitespace"],
        }
    ]
    assert [f["path"] for f in entry["files"]] == [
        "data/gsm8k/test-00000-of-00001.parquet",
        "data/gsm8k/train-00000-of-00001.parquet",
        "gsm8k.hacks.json",  # the recorded reward-hacking audit
        "gsm8k.yaml",
        "prompts/math_final_answer.jinja",
    ]
    assert entry["files"][3]["bytes"] == (ENVS / "gsm8k.yaml").stat().st_size
    assert entry["hacks_audit"]["status"] == "passed"
    sample = entry["sample"]
    assert (sample["split"], sample["index"], sample["task_id"]) == ("train", 0, "train-0")
    assert [m["role"] for m in sample["messages"]] == ["user"]
    assert sample["messages"][0]["blocks"][0]["text"].startswith("Natalia sold clips to 48 of her friends")
    assert entry["content_hash"].startswith("sha256:") and len(entry["content_hash"]) == 7 + 64


def test_a_shipped_template_is_hashed_under_the_name_the_spec_uses(gsm8k: Environment) -> None:
    files = gsm8k.files
    assert files["prompts/math_final_answer.jinja"] == templates_dir() / "prompts" / "math_final_answer.jinja"
    assert files["gsm8k.yaml"] == (ENVS / "gsm8k.yaml").resolve()


def test_the_content_hash_follows_every_file(specs_dir: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(specs_dir, tmp_path / "copy")
    first = catalog_entry(load_environment(specs_dir / "capitals.yaml"))["content_hash"]
    assert catalog_entry(load_environment(copy / "capitals.yaml"))["content_hash"] == first
    spec = copy / "capitals.yaml"
    spec.write_text(spec.read_text() + "# a comment\n")
    assert catalog_entry(load_environment(spec))["content_hash"] != first


def test_data_bytes_change_the_hash(specs_dir: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    before = catalog_entry(load_environment(specs_dir / "squares.yml"))["content_hash"]
    pq.write_table(pa.table({"n": [2, 3], "square": ["4", "9"]}), specs_dir / "data" / "squares.parquet")
    env = load_environment(specs_dir / "squares.yml")
    assert len(env.split("train")) == 2
    assert catalog_entry(env)["content_hash"] != before


def test_system_prompt_and_html_text_are_data(specs_dir: Path) -> None:
    entry = catalog_entry(load_environment(specs_dir / "capitals.yaml"))
    assert entry["title"] == 'Capitals <of> the "world" & more'

    def message(role: str, text: str) -> dict[str, object]:
        return {"role": role, "blocks": [{"text": text, "detail": None, "type": "text"}], "detail": None}

    assert entry["sample"]["messages"] == [
        message("system", "You answer with one word."),
        message("user", "What is the capital of France?"),
    ]


def test_images_in_the_sample_are_elided(specs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = load_environment(specs_dir / "capitals.yaml")
    image = ImageBlock(data="iVBORw0KGgo" * 100, mimeType="image/png")
    monkeypatch.setattr(
        env, "messages", lambda task: [Message(role="user", blocks=[TextBlock(text="Look:"), image])]
    )
    blocks = catalog_entry(env)["sample"]["messages"][0]["blocks"]
    assert blocks[1] == {"type": "image", "mimeType": "image/png", "elided": True, "base64_chars": 1100}
    assert "iVBOR" not in json.dumps(blocks)


def test_secrets_in_configs_are_not_published(specs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = load_environment(specs_dir / "capitals.yaml")
    monkeypatch.setattr(
        env.source, "describe", lambda: {"type": "hub", "token": "hf_secret", "auth": {"api_key": "sk-1"}}
    )
    assert catalog_entry(env)["dataset"] == {
        "type": "hub", "token": "<redacted>", "auth": {"api_key": "<redacted>"}
    }  # fmt: skip


def test_get_catalog(gsm8k: Environment, specs_dir: Path) -> None:
    squares = load_environment(specs_dir / "squares.yml")
    client = TestClient(create_app([gsm8k, squares]))
    response = client.get("/catalog", follow_redirects=False)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    body = response.json()
    assert list(body) == ["envbuilder", "environments"]
    assert [e["name"] for e in body["environments"]] == ["gsm8k", "squares"]
    assert all(list(e) == ENTRY_KEYS for e in body["environments"])
    assert body == json.loads(json.dumps(build_catalog([gsm8k, squares])))
    assert client.get("/catalog").json() == body  # cached, same answer


def test_catalog_command_writes_catalog_json(specs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    result = CliRunner().invoke(app, ["catalog", str(specs_dir), "--out", str(out), "--skip-broken"])
    assert result.exit_code == 0, result.output
    assert "broken.yaml was not loaded" in result.stderr
    assert result.stdout == (
        f"envbuilder: catalogued 2 environment(s) in {out / 'index.html'} (4 files); "
        f"left out 1 that failed to load: {specs_dir / 'broken.yaml'}\n"
    )
    data = json.loads((out / "catalog.json").read_text())
    assert [e["name"] for e in data["environments"]] == ["capitals", "squares"]
    assert data == json.loads(
        json.dumps(
            build_catalog(
                [load_environment(specs_dir / "capitals.yaml"), load_environment(specs_dir / "squares.yml")]
            )
        )
    )
    assert sorted(p.name for p in (out / "env").iterdir()) == ["capitals.html", "squares.html"]


def test_catalog_command_prints_json_without_out(specs_dir: Path) -> None:
    result = CliRunner().invoke(app, ["catalog", str(specs_dir / "squares.yml")])
    assert result.exit_code == 0, result.output
    assert [e["name"] for e in json.loads(result.stdout)["environments"]] == ["squares"]


@pytest.mark.parametrize("output", ["--out", "--readme"])
def test_catalog_never_drops_a_spec_silently(specs_dir: Path, tmp_path: Path, output: str) -> None:
    target = tmp_path / ("site" if output == "--out" else "README.md")
    if output == "--readme":
        target.write_text("the committed table\n")
    result = CliRunner().invoke(app, ["catalog", str(specs_dir), output, str(target)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.endswith(
        "error: 1 failed to load: nothing written (fix it, or pass --skip-broken to catalog the others)\n"
    )
    assert not (tmp_path / "site").exists()
    assert output == "--out" or target.read_text() == "the committed table\n"


def test_catalog_strict(specs_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["catalog", str(specs_dir), "--strict", "--out", str(tmp_path / "s")])
    assert result.exit_code == 1 and not (tmp_path / "s").exists()
