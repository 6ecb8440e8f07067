"""What start-up imports: only what the command and the spec use (timings are in bench/startup.py).

Each check runs in a fresh interpreter and reads ``sys.modules``: a heavy library imported at
start-up is paid by every `serve` and every CLI call, and a spec that does not use a plugin must
not import it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HEAVY = ("httpx", "datasets", "pyarrow", "reasoning_gym", "math_verify", "sympy", "mcp", "fastapi")


def _modules(code: str) -> set[str]:
    """The modules imported after ``code`` runs in a fresh interpreter."""
    probe = code + "\nimport json as _j, sys as _s\nprint(_j.dumps(sorted(_s.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, timeout=300
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _plugins(modules: set[str]) -> set[str]:
    """The plugin modules among ``modules`` (private modules of the three plugin packages)."""
    kinds = ("envbuilder.data._", "envbuilder.graders._", "envbuilder.tools._")
    return {m for m in modules if m.startswith(kinds)}


def test_help_imports_no_heavy_library():
    modules = _modules(
        "import contextlib, io, sys\n"
        "from envbuilder.cli import main\n"
        "sys.argv = ['envbuilder', '--help']\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
        "    main()\n"
        "assert 'serve' in out.getvalue(), out.getvalue()\n"
    )
    assert {m for m in HEAVY if m in modules} == set()
    assert "envbuilder.spec" not in modules
    assert _plugins(modules) == set()
    # what only a command's run needs is imported when it runs, not to list the commands
    assert {m for m in ("asyncio", "http.server") if m in modules} == set()


def test_importing_the_spec_imports_no_plugin():
    modules = _modules("import envbuilder.spec")
    assert {m for m in HEAVY if m in modules} == set()
    assert _plugins(modules) == set()
    assert not {m for m in modules if m.split(".")[:2] in (["envbuilder", "data"], ["envbuilder", "graders"])}


def test_a_spec_imports_only_the_plugins_it_names():
    modules = _modules(
        "from envbuilder.spec import load_spec\n"
        "spec = load_spec('envs/gsm8k.yaml').spec\n"
        "assert spec.grader.type == 'exact_match' and spec.dataset.type == 'parquet'\n"
    )
    assert {"envbuilder.graders._exact", "envbuilder.data._parquet"} <= modules
    assert "envbuilder.graders._judge" not in modules
    assert "envbuilder.data._reasoning_gym" not in modules
    assert "envbuilder.tools._mcp" not in modules


def test_serving_a_parquet_spec_imports_no_http_client_nor_datasets():
    modules = _modules(
        "from envbuilder.environment import load_environment\n"
        "env = load_environment('envs/gsm8k.yaml')\n"
        "from envbuilder.server import create_app\n"
        "assert len(env.split('test')) > 0\n"
    )
    assert {m for m in ("httpx", "datasets", "reasoning_gym", "mcp") if m in modules} == set()


def test_the_load_time_sample_of_a_large_parquet_split_decodes_few_row_groups(tmp_path: Path):
    """The budget check's sample of rows spread over a split must not decode every row group of a
    file with large ones (a 10M-row file: the whole file, before the server could start)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from envbuilder.data._parquet import ParquetTable
    from envbuilder.environment import SAMPLE_BLOCKS, Environment
    from envbuilder.spec import parse_spec

    n = 40 * 5000
    pq.write_table(
        pa.table({"question": [f"q{i}" for i in range(n)], "answer": [str(i) for i in range(n)]}),
        tmp_path / "rows.parquet",
        row_group_size=5000,
    )
    spec = (
        "name: big\ndataset: {type: parquet, files: {test: rows.parquet}}\nsplits: {test: {}}\n"
        'prompt: {template: "{{ question }}"}\ngrader: {type: exact_match, target: "{{ answer }}"}\n'
    )
    decoded: list[int] = []
    read = pq.ParquetFile.read_row_group

    def counting(self: pq.ParquetFile, i: int, *args: object, **kwargs: object) -> pa.Table:
        decoded.append(i)
        return read(self, i, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ParquetTable, "_start_index", lambda self: None)  # no background index here
        mp.setattr(pq.ParquetFile, "read_row_group", counting)
        Environment(parse_spec(spec, file=str(tmp_path / "big.yaml"), base_dir=tmp_path))
    assert 0 in decoded
    assert len(set(decoded)) <= SAMPLE_BLOCKS


def test_serving_imports_fastapi_only_after_it_listens():
    """`serve` builds its application without FastAPI or Starlette (they are imported by the
    build that starts once the server listens); a Parquet spec imports pyarrow, not datasets."""
    modules = _modules(
        "from envbuilder.environment import load_environment\n"
        "from envbuilder.server import ServerSettings, serving_app\n"
        "app = serving_app([load_environment('envs/gsm8k.yaml')], ServerSettings())\n"
        "assert not app.built.done()\n"
    )
    assert {m for m in ("fastapi", "starlette", "pydantic.v1", "datasets", "httpx") if m in modules} == set()
    assert "pyarrow" in modules


GENERATED_SPEC = """\
name: sums
dataset: {type: generator, generator: arithmetic, num_tasks: 1000, seed: 1}
splits: {test: {}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}", extract: number}
"""


def test_a_spec_without_files_never_imports_pyarrow(tmp_path: Path):
    """A spec whose tasks are generated reads no table: neither pyarrow (nor numpy under it)
    nor FastAPI is imported to load and serve it."""
    (tmp_path / "sums.yaml").write_text(GENERATED_SPEC)
    modules = _modules(
        "from envbuilder.environment import load_environment\n"
        "from envbuilder.server import ServerSettings, serving_app\n"
        f"env = load_environment({str(tmp_path / 'sums.yaml')!r})\n"
        "assert len(env.split('test')) == 1000 and env.split('test').task(3)['question']\n"
        "serving_app([env], ServerSettings())\n"
    )
    assert {m for m in ("pyarrow", "numpy", "datasets", "fastapi", "starlette") if m in modules} == set()
