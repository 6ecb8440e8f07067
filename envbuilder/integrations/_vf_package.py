"""A spec as a verifiers environment package: ``pip install OUT/`` then ``vf-eval NAME``.

verifiers finds an environment by name: ``vf-eval NAME`` imports the module ``NAME`` (``-`` read
as ``_``) and calls its ``load_environment``; the Environments Hub publishes such packages. The
package this module writes is::

    OUT/pyproject.toml          the project NAME (hatchling), depending on envbuilder[verifiers]
    OUT/README.md               the catalog entry: title, description, splits, tools, grader, licence
    OUT/MODULE/__init__.py      load_environment(split, num_tasks, max_turns, secrets)
    OUT/MODULE/NAME.zip         the spec's pack: the spec, its data and a lock of their hashes

The package carries a pack, not loose files, so that what runs is what was exported: the pack's
own sha256 is pinned in ``__init__.py`` and checked before it is opened, and opening it checks
every file against the lock (see :mod:`envbuilder.catalog`). Writing nothing verifiers-specific
here keeps the export free of the ``verifiers`` import; the package imports
:mod:`envbuilder.integrations.verifiers` when verifiers loads it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder._version import __version__
from envbuilder.catalog import catalog_entry, file_sha256, pack
from envbuilder.environment import load_environment
from envbuilder.errors import DataError
from envbuilder.integrations._export import require_empty_folder

__all__ = ["VerifiersPackage", "export_verifiers"]

VERIFIERS_REQUIREMENT = "verifiers>=0.3,<0.4"
"""The verifiers releases envbuilder's adapter runs on (0.4 pins mcp 2, which the ORS clients'
sse-starlette pin cannot install beside): the same range as the ``verifiers`` extra."""


@dataclass(frozen=True)
class VerifiersPackage:
    """What :func:`export_verifiers` wrote."""

    path: Path
    name: str
    module: str
    content_hash: str
    pack_sha256: str


def export_verifiers(
    spec: Path, out: Path, *, name: str | None = None, trust_code: bool | None = None
) -> VerifiersPackage:
    """Write the verifiers environment package of ``spec`` into the folder ``out``.

    Args:
        name: The package's name, which ``vf-eval`` takes (default: the spec's ``name``).
        trust_code: Whether the spec's own code may run while it is loaded and packed (as
            :func:`envbuilder.catalog.pack`).

    Raises:
        SpecError: the spec does not load.
        DataError: ``out`` holds files already (``export_exists``), the name is not an
            importable module name (``export_name``), or the spec cannot be packed.
    """
    require_empty_folder(out)
    env = load_environment(spec, trust_code=trust_code)
    name = name or env.name
    module = name.replace("-", "_")
    if not module.isidentifier() or not module.isascii():
        raise DataError(
            f"the package name {name!r} is not an importable module name (vf-eval imports {module!r})",
            hint="Pass --name with letters, digits, '_' or '-', not starting with a digit",
            code="export_name",
        )
    entry = catalog_entry(env)
    with tempfile.TemporaryDirectory(prefix="envbuilder-export-") as scratch:
        staging = Path(scratch) / "package"
        folder = staging / module
        folder.mkdir(parents=True)
        packed = pack(spec, folder / f"{module}.zip", trust_code=trust_code)
        digest = file_sha256(packed.path)
        (folder / "__init__.py").write_text(_init(entry, module, digest, packed.content_hash))
        (staging / "pyproject.toml").write_text(_pyproject(entry, name, module))
        (staging / "README.md").write_text(_readme(entry, name, packed.content_hash))
        out.mkdir(parents=True, exist_ok=True)
        for item in staging.iterdir():
            shutil.move(str(item), out / item.name)
    return VerifiersPackage(out, name, module, packed.content_hash, digest)


def _pyproject(entry: dict[str, Any], name: str, module: str) -> str:
    description = " ".join((entry["title"] or name).split())
    lines = [
        "[build-system]",
        'requires = ["hatchling"]',
        'build-backend = "hatchling.build"',
        "",
        "[project]",
        f"name = {_toml(name)}",
        f"version = {_toml(_version(entry['version']))}",
        f"description = {_toml(description)}",
        'readme = "README.md"',
        'requires-python = ">=3.11"',
        f"tags = {_toml(entry['tags'])}",
        "dependencies = [",
        f"    {_toml(f'envbuilder[verifiers]>={__version__}')},",
        f"    {_toml(VERIFIERS_REQUIREMENT)},",
        "]",
        *([f"license = {{text = {_toml(entry['license'])}}}"] if entry["license"] else []),
        "",
        "[tool.hatch.build.targets.wheel]",
        f"packages = [{_toml(module)}]",
        "",
        "[tool.verifiers.eval]",
        "num_examples = 5",
        "rollouts_per_example = 3",
        "",
    ]
    return "\n".join(lines)


def _version(version: str) -> str:
    """The spec's version as a PEP 440 version (a bare ``1`` is ``1``; anything else PEP 440
    refuses becomes a local label of ``0``, so the package still builds)."""
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        label = "".join(c if c.isalnum() else "." for c in version).strip(".") or "0"
        return f"0+{label}"


def _toml(value: Any) -> str:
    """A TOML string or array of strings (JSON's string escapes are TOML's basic strings')."""
    return json.dumps(value, ensure_ascii=False)


def _init(entry: dict[str, Any], module: str, digest: str, content_hash: str) -> str:
    title = " ".join((entry["title"] or module).split()).replace('"""', "'''").replace("\\", "\\\\")
    return f'''"""{title}: an envbuilder environment for verifiers (exported by envbuilder {__version__}).

``vf-eval {module} -m MODEL -b URL`` plays it; ``load_environment`` takes ``split`` (default:
the spec's train split to train on, its test split to evaluate on), ``num_tasks``, ``max_turns``
and ``secrets`` (e.g. ``{{"OPENAI_API_KEY": ...}}`` for a judge or a simulated user). The
environment is the pack beside this file, checked against the hash below before it is opened,
and each of its files against the pack's lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACK = Path(__file__).with_name({module + ".zip"!r})
PACK_SHA256 = {digest!r}
CONTENT_HASH = {content_hash!r}


def load_environment(
    split: str | None = None,
    num_tasks: int | None = None,
    max_turns: int = 10,
    secrets: dict[str, str] | None = None,
) -> Any:
    """The verifiers environment of this package's spec (a ``verifiers.MultiTurnEnv``)."""
    from envbuilder.integrations.verifiers import load_exported

    return load_exported(
        PACK,
        PACK_SHA256,
        CONTENT_HASH,
        split=split,
        num_tasks=num_tasks,
        max_turns=max_turns,
        secrets=secrets,
    )
'''


def _readme(entry: dict[str, Any], name: str, content_hash: str) -> str:
    module = name.replace("-", "_")
    splits = ", ".join(f"{s['name']} ({s['num_tasks']:,} tasks)" for s in entry["splits"])
    tools = ", ".join(f"`{t['name']}`" for t in entry["tools"])
    lines = [f"# {entry['title'] or name}", ""]
    if entry["description"]:
        lines += [" ".join(entry["description"].split()), ""]
    lines += [
        f"An envbuilder environment packaged for "
        f"[verifiers](https://github.com/PrimeIntellect-ai/verifiers) by envbuilder {__version__}.",
        "",
        "```sh",
        f"pip install {name}            # or: pip install ./{name} from this folder",
        f"vf-eval {module} -m MODEL -b http://localhost:8000/v1 -n 5 -r 1",
        "```",
        "",
        'Arguments (`-a \'{"split": "train", "num_tasks": 100}\'`): `split` (default: the train split '
        "to train on, the test split to evaluate on; a name: that split for both), `num_tasks`, `max_turns`, "
        "and `secrets` (API keys a judge or a simulated user reads). The reward is the spec's grader's; "
        "the `graded` metric is 0 when an episode was ungradeable (scored 0.0 by verifiers).",
        "",
        "| | |",
        "|---|---|",
        f"| Splits | {splits} |",
        f"| Tools | {tools or 'none'} |",
        f"| Grader | `{entry['graders'][0].get('type', '?')}` |",
        f"| Tags | {', '.join(entry['tags']) or '—'} |",
        f"| Licence | {entry['license'] or '—'} |",
        f"| Version | {entry['version']} |",
        f"| Content hash | `{content_hash}` |",
        "",
    ]
    if entry["citation"]:
        lines += ["## Citation", "", " ".join(entry["citation"].split()), ""]
    return "\n".join(lines)
