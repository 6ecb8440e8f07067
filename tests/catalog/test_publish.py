"""Publishing to a real S3-compatible server (moto) and serving from its catalog URL in another process."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envbuilder.catalog import find_specs, publish
from envbuilder.cli import app
from envbuilder.environment import load_environment
from tests.conftest import ENVS
from tests.stores import envbuilder_serve, moto_s3

#: Every shipped spec, `extends:` variants included (a pack carries the files loading read).
SHIPPED = [p.name for p in find_specs([ENVS])]


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with moto_s3() as env:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        yield env


@pytest.fixture
def envs_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "envs"
    shutil.copytree(ENVS, folder)
    return folder


def _gold(spec: Path, index: int) -> str:
    return str(load_environment(spec).split("test").task(index)["answer"].split("####")[-1].strip())


def test_publish_envs_to_s3_then_serve_the_catalog_url_with_both_clients(
    s3: dict[str, str], envs_copy: Path, tmp_path: Path
) -> None:
    report = publish([envs_copy / name for name in SHIPPED], "s3://envs/catalog-root")
    assert report.catalog_url == "s3://envs/catalog-root/catalog.json"
    packs = [n for n in report.uploaded if n.endswith(".zip")]
    assert len(packs) == len(SHIPPED) and report.uploaded[-1] == "catalog.json"

    cache = {"ENVBUILDER_CACHE_DIR": str(tmp_path / "empty-cache")}
    with envbuilder_serve([report.catalog_url, "--env", "gsm8k@1"], {**s3, **cache}) as url:
        from ors.client import ORS

        with ORS(base_url=url) as client, client.environment("gsm8k").session(split="test", index=3) as s:
            out = s.call_tool("submit", {"answer": _gold(envs_copy / "gsm8k.yaml", 3)})
            assert (out.reward, out.finished) == (1.0, True)

        from openreward import EnvironmentsAPI

        api = EnvironmentsAPI(base_url=url, api_key=None)
        with api.get(name="gsm8k", variant="gsm8k").session(split="test", index=4) as s:
            assert s.get_messages()[0].role == "user"
            out = s.call_tool("submit", {"answer": _gold(envs_copy / "gsm8k.yaml", 4)})
            assert (out.reward, out.finished) == (1.0, True)

    # A second version of one environment (one no other spec extends): only its pack and the pages
    # that changed go up.
    spec = envs_copy / "digits.yaml"
    spec.write_text(spec.read_text().replace("name: digits\n", 'name: digits\nversion: "2"\n'))
    again = publish([envs_copy / name for name in SHIPPED], "s3://envs/catalog-root")
    changed = {n for n in again.uploaded if n.startswith("packs/")}
    assert {n.rsplit("-", 1)[0] for n in changed} == {"packs/digits/digits-2"}
    assert {n.rsplit(".", 1)[-1] for n in changed} == {"zip", "json"}
    assert set(again.uploaded) - changed <= {"catalog.json", "index.html", "env/digits.html"}
    assert "catalog.json" in again.uploaded and "env/gsm8k.html" in again.unchanged

    # Both versions stay listed and servable; the old pack was not deleted.
    runner = CliRunner()
    for version in ("1", "2"):
        result = runner.invoke(app, ["pull", report.catalog_url, "--env", f"digits@{version}"])
        assert result.exit_code == 0, result.output
        assert f"pulled digits@{version} into" in result.output
    import s3fs

    catalog = json.loads(s3fs.S3FileSystem(skip_instance_cache=True).cat_file(report.catalog_url))
    entry = next(e for e in catalog["environments"] if e["name"] == "digits")
    assert [v["version"] for v in entry["versions"]] == ["2", "1"]
    assert entry["serve"] == "envbuilder serve s3://envs/catalog-root/catalog.json --env digits@2"


def test_publishing_the_same_specs_again_uploads_nothing(s3: dict[str, str]) -> None:
    specs = [ENVS / "digits.yaml"]
    first = publish(specs, "s3://envs/same")
    again = publish(specs, "s3://envs/same")
    assert len(first.uploaded) == 5  # pack, lock, catalog.json, index.html, env/digits.html
    assert again.uploaded == [] and sorted(again.unchanged) == sorted(first.uploaded)


def test_the_publish_command_names_the_destination_when_it_fails(tmp_path: Path) -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
    }
    result = CliRunner().invoke(
        app, ["publish", str(ENVS / "digits.yaml"), "s3://no-such-bucket/x"], env={**os.environ, **env}
    )
    assert result.exit_code == 1
    assert "cannot read catalog.json from 's3://no-such-bucket/x'" in result.output
    assert "Check AWS credentials" in result.output


def test_changed_content_under_a_published_version_is_refused(envs_copy: Path, tmp_path: Path) -> None:
    spec = envs_copy / "digits.yaml"
    dest = str(tmp_path / "published")
    publish([spec], dest)
    before = (tmp_path / "published" / "catalog.json").read_bytes()
    changed = spec.read_text(encoding="utf-8").replace("tags: [vision,", "tags: [changed,")
    spec.write_text(changed, encoding="utf-8")
    result = CliRunner().invoke(app, ["publish", str(spec), dest])
    assert result.exit_code == 1
    assert f"digits@1 is already published at {tmp_path / 'published'} with other content" in result.output
    assert f"Set a new `version:` in {spec}" in result.output
    assert (tmp_path / "published" / "catalog.json").read_bytes() == before  # nothing uploaded
    spec.write_text(spec.read_text(encoding="utf-8") + "version: '2'\n", encoding="utf-8")
    publish([spec], dest)
    catalog = json.loads((tmp_path / "published" / "catalog.json").read_text(encoding="utf-8"))
    assert [v["version"] for v in catalog["environments"][0]["versions"]] == ["2", "1"]
