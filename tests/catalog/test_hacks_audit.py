"""The reward-hacking audit in catalog entries: ``check --hacks --record`` writes it beside the
spec, packs carry it, and the entry (``catalog.json`` and the page) says passed, stale or not
audited."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from typer.testing import CliRunner

from envbuilder.catalog import build_catalog, catalog_entry, write_site
from envbuilder.catalog._audit import APPLIES_TO, audited_hash
from envbuilder.cli import app
from envbuilder.environment import load_environment
from tests.conftest import ENVS

runner = CliRunner()


def _record(spec: Path) -> dict[str, object]:
    result = runner.invoke(app, ["check", str(spec), "--sample", "1", "--hacks", "--record"])
    assert result.exit_code == 0, result.output
    assert "recorded in" in result.output
    return json.loads(spec.with_name(spec.stem + ".hacks.json").read_text(encoding="utf-8"))


def test_not_audited_then_passed_then_stale(specs_dir: Path, tmp_path: Path) -> None:
    spec = specs_dir / "capitals.yaml"
    assert catalog_entry(load_environment(spec))["hacks_audit"] == {"status": "not audited"}

    record = _record(spec)
    assert record["max_reward"] == 0.0 and record["rewarded"] == []
    assert isinstance(record["hostile_answers"], int) and record["hostile_answers"] >= 9
    env = load_environment(spec)
    assert "capitals.hacks.json" in env.files  # packs carry it
    audit = catalog_entry(env)["hacks_audit"]
    assert audit["status"] == "passed"
    assert audit["content_hash"] == record["content_hash"] and audit["date"] == record["date"]
    assert (audit["max_reward"], audit["hostile_answers"]) == (0.0, record["hostile_answers"])

    out = tmp_path / "site"
    write_site(build_catalog([env]), out)
    page = (out / "env" / "capitals.html").read_text(encoding="utf-8")
    assert "Reward-hacking audit" in page and "passed" in page and str(record["date"]) in page
    # The two hashes on the page differ, and the page says why.
    entry = build_catalog([env])["environments"][0]
    assert entry["content_hash"] != audit["content_hash"] and audit["applies_to"] == APPLIES_TO
    assert "(which cannot hold its own hash)" in page and "so the two hashes differ" in page
    published = json.loads((out / "catalog.json").read_text(encoding="utf-8"))
    assert published["environments"][0]["hacks_audit"]["status"] == "passed"

    # The spec changes: the record applies to other files.
    spec.write_text(spec.read_text(encoding="utf-8").replace("one word", "one word only"))
    stale = catalog_entry(load_environment(spec))["hacks_audit"]
    assert stale["status"] == "stale" and stale["content_hash"] == record["content_hash"]
    assert stale["current_hash"] != record["content_hash"]
    write_site(build_catalog([load_environment(spec)]), out)
    assert "stale" in (out / "env" / "capitals.html").read_text(encoding="utf-8")

    # Auditing again makes it current; the record itself is not part of the hash it names.
    again = _record(spec)
    assert again["content_hash"] == stale["current_hash"]
    assert catalog_entry(load_environment(spec))["hacks_audit"]["status"] == "passed"


def test_a_failed_audit_is_published_as_failed(specs_dir: Path, tmp_path: Path) -> None:
    spec = specs_dir / "capitals.yaml"
    env = load_environment(spec)
    rewarded = [{"answer": "every choice", "task": "test[0]", "reward": 1.0}]
    record = {"content_hash": audited_hash(env), "max_reward": 1.0, "hostile_answers": 10}
    record |= {"rewarded": rewarded, "date": "2026-12-01"}
    spec.with_name("capitals.hacks.json").write_text(json.dumps(record))
    env = load_environment(spec)
    audit = catalog_entry(env)["hacks_audit"]
    assert audit["status"] == "failed" and audit["rewarded"] == rewarded
    write_site(build_catalog([env]), tmp_path / "site")
    page = (tmp_path / "site" / "env" / "capitals.html").read_text(encoding="utf-8")
    assert "failed" in page and "every choice on test[0]" in page


def test_record_needs_hacks(specs_dir: Path) -> None:
    result = runner.invoke(app, ["check", str(specs_dir / "capitals.yaml"), "--record"])
    assert result.exit_code == 2 and "--hacks" in result.output


def test_an_unreadable_record_is_said(specs_dir: Path) -> None:
    (specs_dir / "capitals.hacks.json").write_text("{not json")
    audit = catalog_entry(load_environment(specs_dir / "capitals.yaml"))["hacks_audit"]
    assert audit["status"] == "unreadable" and "capitals.hacks.json" in audit["error"]


def test_shipped_environments_publish_a_current_audit() -> None:
    """Every shipped spec but mt_bench (its judge needs a model endpoint) carries a record of its
    current files (after a change: `envbuilder check envs/<name>.yaml --hacks --record`)."""
    statuses = {
        spec.stem: catalog_entry(load_environment(spec))["hacks_audit"]["status"]
        for spec in sorted(ENVS.glob("*.yaml"))
    }
    assert statuses.pop("mt_bench") == "not audited"
    assert {name for name, status in statuses.items() if status != "passed"} == set(), statuses


def test_a_pack_carries_the_record(specs_dir: Path, tmp_path: Path) -> None:
    spec = specs_dir / "capitals.yaml"
    _record(spec)
    out = tmp_path / "capitals.zip"
    result = runner.invoke(app, ["pack", str(spec), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert any(n.endswith("capitals.hacks.json") for n in zipfile.ZipFile(out).namelist())
