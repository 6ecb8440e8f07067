"""Packs: a spec, its data and a lock of hashes; served elsewhere exactly as published, or refused."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from envbuilder.catalog import catalog_entry, load_pack, open_pack, pack
from envbuilder.catalog._pack import LOCK_NAME
from envbuilder.cli import app
from envbuilder.environment import Environment, load_environment
from envbuilder.errors import DataError
from tests.catalog.conftest import SQUARES, write_data
from tests.conftest import ENVS


@pytest.fixture(scope="module")
def gsm8k_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packs") / "gsm8k.zip"
    pack(ENVS / "gsm8k.yaml", out)
    return out


def _rewrite(src: Path, dst: Path, change: dict[str, bytes]) -> None:
    """Copy the zip ``src`` to ``dst`` with some members' bytes replaced (or added)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, change.pop(info.filename, None) or zin.read(info))
        for name, data in change.items():
            zout.writestr(name, data)


def test_the_pack_holds_the_spec_its_data_its_template_and_a_lock(
    gsm8k_pack: Path, gsm8k: Environment
) -> None:
    with zipfile.ZipFile(gsm8k_pack) as zf:
        names = zf.namelist()
        lock = json.loads(zf.read(LOCK_NAME))
    assert names == [
        LOCK_NAME,
        "data/gsm8k/test-00000-of-00001.parquet",
        "data/gsm8k/train-00000-of-00001.parquet",
        "gsm8k.hacks.json",  # the recorded reward-hacking audit travels with the pack
        "gsm8k.yaml",
        "prompts/math_final_answer.jinja",
    ]
    entry = catalog_entry(gsm8k)
    assert lock["name"] == "gsm8k" and lock["spec"] == "gsm8k.yaml" and lock["format"] == 1
    assert lock["content_hash"] == entry["content_hash"]
    assert lock["files"] == {f["path"]: f["sha256"] for f in entry["files"]}


def test_round_trip_serves_the_same_tasks(gsm8k_pack: Path, gsm8k: Environment, tmp_path: Path) -> None:
    env = load_pack(gsm8k_pack, cache_dir=tmp_path)
    assert env.loaded.base_dir.is_relative_to(tmp_path)
    for name, view in gsm8k.splits.items():
        other = env.split(name)
        assert len(other) == len(view)
        for i in (0, 1, len(view) - 1):
            assert other.task(i) == view.task(i)
            assert env.messages(other.task(i)) == gsm8k.messages(view.task(i))
    assert catalog_entry(env)["content_hash"] == catalog_entry(gsm8k)["content_hash"]
    assert open_pack(gsm8k_pack, cache_dir=tmp_path) == env.loaded.path  # extracted once, reused


def test_packs_are_reproducible(gsm8k_pack: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.zip"
    pack(ENVS / "gsm8k.yaml", again)
    assert again.read_bytes() == gsm8k_pack.read_bytes()


def test_serve_a_pack(
    gsm8k_pack: Path, gsm8k: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: apps.append(app))
    result = CliRunner().invoke(app, ["serve", str(gsm8k_pack), "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    client = TestClient(apps[0])
    assert client.post("/gsm8k/task", json={"split": "test", "index": 5}).json()["task"] == gsm8k.public(
        gsm8k.split("test").task(5)
    )
    assert (
        client.get("/catalog").json()["environments"][0]["content_hash"]
        == catalog_entry(gsm8k)["content_hash"]
    )


def test_pack_command(tmp_path: Path, gsm8k: Environment) -> None:
    out = tmp_path / "out" / "gsm8k.zip"
    result = CliRunner().invoke(app, ["pack", str(ENVS / "gsm8k.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    size = sum(f["bytes"] for f in catalog_entry(gsm8k)["files"])
    assert result.stdout == (
        f"envbuilder: packed gsm8k (5 files, {size:,} bytes) into {out}\n"
        f"envbuilder: content hash {catalog_entry(gsm8k)['content_hash']}\n"
    )
    assert not list(out.parent.glob("*.partial"))


def test_a_tampered_pack_is_refused(
    gsm8k_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tampered = tmp_path / "tampered.zip"
    spec = (ENVS / "gsm8k.yaml").read_bytes().replace(b"extract: number", b"extract: last_line")
    _rewrite(gsm8k_pack, tampered, {"gsm8k.yaml": spec})
    with pytest.raises(DataError) as info:
        load_pack(tampered, cache_dir=tmp_path / "cache")
    assert info.value.code == "pack_mismatch"
    assert info.value.message.startswith(
        f"pack {str(tampered)!r} does not match its lock, refusing to serve it:\n  gsm8k.yaml: sha256 "
    )
    assert list((tmp_path / "cache" / "packs").iterdir()) == []  # nothing half-extracted is kept

    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("served a tampered pack"))
    result = CliRunner().invoke(app, ["serve", str(tampered), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 1
    assert (
        f"error: {tampered} was not loaded:\npack {str(tampered)!r} does not match its lock" in result.stderr
    )


def test_an_extra_or_missing_file_is_refused(gsm8k_pack: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra.zip"
    _rewrite(gsm8k_pack, extra, {"data/gsm8k/more.parquet": b"x"})
    with pytest.raises(DataError, match=r"data/gsm8k/more.parquet: not in the lock"):
        load_pack(extra, cache_dir=tmp_path)


def test_a_changed_cache_is_refused(gsm8k_pack: Path, tmp_path: Path) -> None:
    spec = open_pack(gsm8k_pack, cache_dir=tmp_path)
    spec.write_text(spec.read_text().replace("number", "last_line"))
    with pytest.raises(DataError) as info:
        open_pack(gsm8k_pack, cache_dir=tmp_path)
    assert info.value.code == "pack_mismatch" and "gsm8k.yaml: sha256" in info.value.message


def test_unsafe_member_paths_are_refused(gsm8k_pack: Path, tmp_path: Path) -> None:
    evil = tmp_path / "evil.zip"
    _rewrite(gsm8k_pack, evil, {"../escape.txt": b"x"})
    with pytest.raises(DataError, match=r"holds an unsafe path '../escape.txt'") as info:
        open_pack(evil, cache_dir=tmp_path / "cache")
    assert info.value.code == "pack_invalid" and not (tmp_path / "escape.txt").exists()


def test_not_a_pack(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.zip"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"is not a readable pack") as info:
        open_pack(bogus, cache_dir=tmp_path)
    assert info.value.code == "pack_invalid"


def test_data_beside_the_spec_folder_is_packed(tmp_path: Path) -> None:
    write_data(tmp_path / "common")
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "squares.yaml"
    spec.write_text(SQUARES.replace("data/squares.parquet", "../common/data/squares.parquet"))
    info = pack(spec, tmp_path / "squares.zip")
    with zipfile.ZipFile(info.path) as zf:
        assert sorted(zf.namelist()) == sorted(
            [LOCK_NAME, "common/data/squares.parquet", "specs/squares.yaml"]
        )
    env = load_pack(info.path, cache_dir=tmp_path / "cache")
    assert env.split("train").task(3) == load_environment(spec).split("train").task(3)


def test_an_absolute_data_path_cannot_be_packed(tmp_path: Path) -> None:
    write_data(tmp_path)
    spec = tmp_path / "squares.yaml"
    spec.write_text(SQUARES.replace("data/squares.parquet", str(tmp_path / "data" / "squares.parquet")))
    with pytest.raises(DataError) as info:
        pack(spec, tmp_path / "squares.zip")
    assert info.value.code == "pack_unportable"
    assert str(info.value) == (
        f"the packed spec reads {str(tmp_path / 'data' / 'squares.parquet')!r}, outside the pack. "
        "Write data paths relative to the spec file, then pack again"
    )
    assert not list(tmp_path.glob("*.zip*"))


def test_a_pack_is_a_zip(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["pack", str(ENVS / "gsm8k.yaml"), "--out", str(tmp_path / "x.tar.gz")])
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: a pack is a .zip file, not {str(tmp_path / 'x.tar.gz')!r}. Use --out NAME.zip\n"
    )


@pytest.mark.parametrize("spec", sorted(p.name for p in ENVS.glob("*.yaml")))
def test_every_shipped_spec_packs_and_serves_the_same(spec: str, tmp_path: Path) -> None:
    out = pack(ENVS / spec, tmp_path / "env.zip")
    env = load_environment(ENVS / spec)
    # A pack is not the user's own folder: tau2_retail's function tools run only when trusted.
    served = load_pack(out.path, cache_dir=tmp_path / "cache", trust_code=True)
    assert served.files.keys() == env.files.keys()
    assert catalog_entry(served)["content_hash"] == catalog_entry(env)["content_hash"] == out.content_hash
    first = next(iter(env.splits))
    assert served.messages(served.split(first).task(0)) == env.messages(env.split(first).task(0))


def test_a_spec_that_extends_packs_its_base(tmp_path: Path) -> None:
    out = pack(ENVS / "gsm8k_cot.yaml", tmp_path / "cot.zip")
    with zipfile.ZipFile(out.path) as zf:
        assert zf.namelist() == [
            LOCK_NAME,
            "data/gsm8k/test-00000-of-00001.parquet",
            "data/gsm8k/train-00000-of-00001.parquet",
            "gsm8k.yaml",
            "gsm8k_cot.hacks.json",
            "gsm8k_cot.yaml",
        ]  # the base's template file (and audit) are not read, not packed


JUDGED = """\
name: judged
extends: base.yaml
prompt:
  turns:
    - role: system
      template_file: prompts/system.jinja
    - role: user
      template_file: prompts/question.jinja
grader:
  type: llm_judge
  base_url: http://127.0.0.1:9/v1
  model: judge
  api_key_secret: null
  template_file: judges/mine.jinja
  question: "{{ n }}"
  reference: "{{ square }}"
"""


def test_turn_judge_and_included_templates_and_the_base_are_packed_and_hashed(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    write_data(folder)
    (folder / "base.yaml").write_text(SQUARES.split("prompt:")[0])  # a base may leave keys out
    (folder / "prompts").mkdir()
    (folder / "prompts" / "system.jinja").write_text("You square numbers.")
    (folder / "prompts" / "question.jinja").write_text("{% include 'prompts/ask.jinja' %}")
    (folder / "prompts" / "ask.jinja").write_text("What is {{ n }} squared?")
    (folder / "judges").mkdir()
    (folder / "judges" / "mine.jinja").write_text("{{ question }} {{ reference }} {{ response }} VERDICT?")
    (folder / "judged.yaml").write_text(JUDGED)
    env = load_environment(folder / "judged.yaml")
    assert list(env.files) == [
        "base.yaml", "data/squares.parquet", "judged.yaml", "judges/mine.jinja",
        "prompts/ask.jinja", "prompts/question.jinja", "prompts/system.jinja",
    ]  # fmt: skip
    out = pack(folder / "judged.yaml", tmp_path / "judged.zip")
    with zipfile.ZipFile(out.path) as zf:
        assert sorted(zf.namelist()) == sorted([LOCK_NAME, *env.files])
    before = catalog_entry(env)["content_hash"]
    for name in ("base.yaml", "prompts/ask.jinja", "judges/mine.jinja"):
        path = folder / name
        path.write_text(path.read_text() + ("\n# changed\n" if name.endswith(".yaml") else " "))
        after = catalog_entry(load_environment(folder / "judged.yaml"))["content_hash"]
        assert after != before, name
        before = after
