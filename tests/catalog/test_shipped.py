"""What envs/ ships: every spec loads, has its licence beside its data, and is listed in its README."""

from __future__ import annotations

from pathlib import Path

import envbuilder.catalog
from envbuilder.catalog import build_catalog, find_specs, load_environments, render_readme
from tests.conftest import ENVS

REGENERATE = "envbuilder catalog envs --readme envs/README.md"


def test_every_shipped_spec_loads() -> None:
    collection = load_environments([ENVS])
    assert [str(f) for f in collection.failures] == []
    assert len(collection.envs) == len(find_specs([ENVS])) >= 1


def test_envs_readme_is_in_sync() -> None:
    collection = load_environments([ENVS])
    links = {name: path.name for name, path in collection.paths.items()}
    expected = render_readme(build_catalog(collection.envs), links, specs="envs", readme="envs/README.md")
    assert (ENVS / "README.md").read_text(encoding="utf-8") == expected, f"run: {REGENERATE}"


def test_every_shipped_environment_has_a_licence_beside_its_data() -> None:
    for env in load_environments([ENVS]).envs:
        assert env.spec.license, f"{env.name}: the spec needs a `license:`"
        data = env.source.files()
        generated = all(view.table.generated for view in env.splits.values())
        assert data or generated, f"{env.name}: ships no data files"
        for path in data:
            licences = [p for p in path.parent.iterdir() if p.name.upper().startswith(("LICENSE", "LICENCE"))]
            assert licences, f"{env.name}: no LICENSE file beside {path.relative_to(ENVS)}"
            assert path.resolve().is_relative_to(ENVS.resolve()), f"{env.name}: data outside envs/"


def test_catalog_api_is_sorted_and_resolves() -> None:
    names = envbuilder.catalog.__all__
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(hasattr(envbuilder.catalog, name) for name in names)
    assert names == [
        "Collection", "LoadFailure", "PackInfo", "PublishReport", "Pulled", "TrustPolicy", "build_catalog",
        "catalog_entry", "content_hash", "file_sha256", "find_specs", "is_pack", "load_environments",
        "load_pack", "open_pack", "pack", "publish", "pull", "render_readme", "serve_command", "write_site",
    ]  # fmt: skip


def test_the_readme_command_writes_the_same_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envbuilder.cli import app

    out = tmp_path / "README.md"
    result = CliRunner().invoke(app, ["catalog", str(ENVS), "--readme", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    expected = (ENVS / "README.md").read_text(encoding="utf-8")
    # Links are relative to the README written: from tmp_path they climb to envs/.
    assert text.splitlines()[7:9] == expected.splitlines()[7:9]  # the table's header
    assert f"Serve them all with `envbuilder serve {ENVS}`." in text and "envbuilder ships" not in text
    assert "| [`gsm8k`](" in text and "gsm8k.yaml) | GSM8K | train 7,473, test 1,319 | MIT |" in text
