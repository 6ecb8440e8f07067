"""Start-up time: this checkout beside older commits, in one run, fresh processes, interleaved rounds.

What is measured, each in a fresh interpreter (medians of the rounds):

- `envbuilder --help` until it exits, and `envbuilder serve --help` (a command's own help);
- `import envbuilder.spec` until it returns;
- `envbuilder serve envs/gsm8k.yaml` until `/health` answers 200;
- `envbuilder serve` of a spec whose train split is a 10-million-row Parquet file, with an empty
  cache (so its background row index is being built while the server starts) until `/health`
  answers 200.

Each older commit is checked out in a git worktree (removed at the end) and run by this
interpreter with the worktree first on `PYTHONPATH`, beside a generated `dist-info` holding that
commit's own entry points (plugins register through them). The 10M-row file is made here once
(`--big`, default /tmp/envbuilder-bench/rows_10m.parquet): GSM8K-shaped rows, pyarrow only.

    python bench/startup.py --base 7ac90a5 --base main --rounds 5
    python bench/startup.py --base main --case=--help --case="serve --help" --rounds 7
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
ROWS = 10_000_000
GROUP_ROWS = 65_536


def make_big_parquet(path: Path, rows: int = ROWS) -> None:
    """GSM8K-shaped rows (`id`, `question`, `answer` ending in `#### n`), one row group at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    schema = pa.schema([("id", pa.int64()), ("question", pa.string()), ("answer", pa.string())])
    with pq.ParquetWriter(tmp, schema, compression="snappy") as writer:
        for start in range(0, rows, GROUP_ROWS):
            n = min(GROUP_ROWS, rows - start)
            ids = pa.array(range(start, start + n), pa.int64())
            a = pc.add(
                pc.multiply(
                    pc.cast(pc.floor(pc.multiply(pc.random(n, initializer=start), 500.0)), pa.int64()), 1
                ),
                5,
            )
            b = pc.add(
                pc.cast(pc.floor(pc.multiply(pc.random(n, initializer=start + 1), 300.0)), pa.int64()), 1
            )
            total = pc.add(a, b)
            s = lambda x: pc.cast(x, pa.string())  # noqa: E731
            question = pc.binary_join_element_wise(
                "Sam has ",
                s(a),
                " marbles and finds ",
                s(b),
                " more. How many marbles does Sam have now?",
                "",
            )
            answer = pc.binary_join_element_wise(
                "Sam has ", s(a), " + ", s(b), " = <<", s(a), "+", s(b), "=", s(total), ">>", s(total),
                " marbles.\n#### ", s(total), "",
            )  # fmt: skip
            writer.write_table(pa.table({"id": ids, "question": question, "answer": answer}, schema=schema))
    tmp.replace(path)


BIG_SPEC = """\
name: big
dataset:
  type: parquet
  files:
    train: {path}
splits:
  train: {{type: train}}
prompt:
  template: "{{{{ question }}}}"
grader:
  type: exact_match
  target: "{{{{ answer.split('####')[-1] }}}}"
  extract: number
"""


class Checkout:
    """A checkout of envbuilder run by this interpreter (its own code and entry points)."""

    def __init__(self, label: str, root: Path, meta: Path):
        self.label = label
        self.root = root
        self.meta = meta

    def env(self, cache: Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.root), str(self.meta)])
        env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1"
        env.pop("ENVBUILDER_CACHE_DIR", None)
        # Byte-compiled as an installed package is (the warm-up writes each checkout's .pyc
        # files): with PYTHONDONTWRITEBYTECODE set, every start compiled envbuilder's ~160
        # modules from source again, a fixed cost no user pays.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if cache is not None:
            env["ENVBUILDER_CACHE_DIR"] = str(cache)
        return env


def write_metadata(root: Path, meta: Path) -> None:
    """A dist-info for ``root``'s own entry points, found before the installed one."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = meta / "envbuilder-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: envbuilder\nVersion: 0.1.0\n")
    lines = []
    for group, items in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in items.items()]
        lines.append("")
    scripts = project.get("scripts", {})
    if scripts:
        lines.append("[console_scripts]")
        lines += [f"{name} = {target}" for name, target in scripts.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@contextlib.contextmanager
def checkouts(bases: list[str], work: Path) -> Iterator[list[Checkout]]:
    made: list[Path] = []
    try:
        result = []
        for commit in bases:
            sha = subprocess.run(
                ["git", "-C", str(HERE), "rev-parse", "--short", commit],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            tree = work / f"tree-{sha}"
            subprocess.run(
                ["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(tree), sha], check=True
            )
            made.append(tree)
            write_metadata(tree, work / f"meta-{sha}")
            result.append(Checkout(f"{commit} ({sha})" if commit != sha else sha, tree, work / f"meta-{sha}"))
        write_metadata(HERE, work / "meta-here")
        result.append(Checkout("this checkout", HERE, work / "meta-here"))
        yield result
    finally:
        for tree in made:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(tree)], check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed_run(checkout: Checkout, args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], cwd=checkout.root, env=checkout.env(), check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - started


def time_to_health(checkout: Checkout, spec: Path, cache: Path, timeout: float = 120.0) -> float:
    """Seconds from starting `envbuilder serve SPEC` until `/health` answers 200."""
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envbuilder", "serve", str(spec), "--host", "127.0.0.1", "--port", str(port)],
        cwd=checkout.root,
        env=checkout.env(cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while time.perf_counter() - started < timeout:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as reply:
                    if reply.status == 200:
                        return time.perf_counter() - started
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{checkout.label}: serve exited: {proc.stderr.read().decode()[-2000:]}"
                    ) from None
                time.sleep(0.005)
        raise RuntimeError(f"{checkout.label}: /health did not answer within {timeout} s")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


CASES = ["--help", "serve --help", "import envbuilder.spec", "serve gsm8k", "serve 10M rows"]


def measure(checkout: Checkout, case: str, big_spec: Path, work: Path) -> float:
    if case.endswith("--help"):
        return timed_run(checkout, ["-m", "envbuilder", *case.split()])
    if case == "import envbuilder.spec":
        return timed_run(checkout, ["-c", "import envbuilder.spec"])
    cache = Path(tempfile.mkdtemp(dir=work))  # fresh caches: the first start a user sees
    try:
        if case == "serve gsm8k":
            return time_to_health(checkout, checkout.root / "envs" / "gsm8k.yaml", cache)
        return time_to_health(checkout, big_spec, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", action="append", default=None, help="older commits (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--big", type=Path, default=Path("/tmp/envbuilder-bench/rows_10m.parquet"))
    parser.add_argument("--write", action="store_true", help="put the table in bench/README.md")
    parser.add_argument(
        "--case", action="append", choices=CASES, default=None, help="measure only these (repeatable)"
    )
    args = parser.parse_args()
    cases = args.case or CASES
    if args.write and args.case:
        parser.error("--write puts the whole table in bench/README.md: measure every case")
    bases = args.base or ["7ac90a5", "main"]
    if "serve 10M rows" in cases and not args.big.exists():
        print(f"making {args.big} ({ROWS:,} rows)…", file=sys.stderr)
        make_big_parquet(args.big)
    work = Path(tempfile.mkdtemp(prefix="envbuilder-startup-"))
    try:
        big_spec = args.big.parent / "big.yaml"  # beside its data, as a spec's data must be
        big_spec.parent.mkdir(parents=True, exist_ok=True)
        big_spec.write_text(BIG_SPEC.format(path=args.big.name))
        times: dict[tuple[str, str], list[float]] = {}
        with checkouts(bases, work) as trees:
            for tree in trees:  # one warm-up each: byte-compile, page cache
                for case in cases:
                    measure(tree, case, big_spec, work)
            for r in range(args.rounds):
                for case in cases:
                    for tree in trees if r % 2 == 0 else list(reversed(trees)):
                        times.setdefault((tree.label, case), []).append(measure(tree, case, big_spec, work))
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
            labels = [t.label for t in trees]
        table = render(labels, times, args.rounds, cases)
        print(table)
        if args.write:
            readme = HERE / "bench" / "README.md"
            text = readme.read_text(encoding="utf-8")
            start, end = "<!-- STARTUP -->", "<!-- /STARTUP -->"
            head, _, rest = text.partition(start)
            _, _, tail = rest.partition(end)
            readme.write_text(head + start + "\n" + table + end + tail, encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render(
    labels: list[str], times: dict[tuple[str, str], list[float]], rounds: int, cases: list[str]
) -> str:
    load = os.getloadavg()
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, load {load[0]:.1f} at the end; "
        f"seconds, median [min–max] of {rounds} interleaved rounds, each a fresh process (serve: until "
        "`/health` answers, fresh cache).",
        "",
        "| checkout | " + " | ".join(cases) + " |",
        "|---|" + "---|" * len(cases),
    ]
    for label in labels:
        cells = []
        for case in cases:
            xs = times[(label, case)]
            cells.append(f"{statistics.median(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
