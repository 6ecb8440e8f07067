"""Start-up time: this checkout beside older commits, in one run, fresh processes, interleaved rounds.

What is measured, each in a fresh interpreter (medians of the rounds):

- `envbuilder --help` until it exits, and `envbuilder serve --help` (a command's own help);
- `import envbuilder.spec` until it returns;
- `envbuilder serve envs/gsm8k.yaml` until `/health` answers 200;
- `envbuilder serve` of a spec whose train split is a 10-million-row Parquet file, with an empty
  cache (so its background row index is being built while the server starts) until `/health`
  answers 200;
- for both serves, also the time until the first whole episode, played as soon as `/health`
  answers (a session, `/create` on train task 0, the prompt, a graded `submit`), so that work
  moved from before `/health` to the first request shows.

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
import json
import os
import platform
import shutil
import signal
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
from typing import Any

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


def _post(url: str, body: dict[str, Any] | None, sid: str | None = None) -> bytes:
    headers = {"content-type": "application/json"}
    if sid is not None:
        headers["X-Session-ID"] = sid
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=60) as reply:
        return bytes(reply.read())


def first_episode(base: str, env: str) -> None:
    """One whole episode as a client plays it: a session, the episode on train task 0, its prompt,
    a submitted answer (graded), the session deleted."""
    minted = _post(f"{base}/create_session", None).decode()
    sid = minted.split("data: ", 1)[1].split("\n", 1)[0].strip()
    _post(f"{base}/create", {"split": "train", "index": 0}, sid)
    request = urllib.request.Request(f"{base}/{env}/prompt", headers={"X-Session-ID": sid})
    with urllib.request.urlopen(request, timeout=60) as reply:
        assert reply.status == 200 and reply.read()
    graded = _post(f"{base}/{env}/call", {"name": "submit", "input": {"answer": "72"}}, sid).decode()
    if '"finished":true' not in graded:
        raise RuntimeError(f"the first episode did not finish: {graded[-500:]}")
    _post(f"{base}/delete", None, sid)


def time_to_health(
    checkout: Checkout, spec: Path, env: str, cache: Path, timeout: float = 120.0
) -> tuple[float, float]:
    """Seconds from starting `envbuilder serve SPEC` until `/health` answers 200, and until the
    first whole episode (played right after) has its reward."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envbuilder", "serve", str(spec), "--host", "127.0.0.1", "--port", str(port)],
        cwd=checkout.root,
        env=checkout.env(cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its children (an older checkout's row index) end with it
    )
    try:
        while time.perf_counter() - started < timeout:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=1) as reply:
                    if reply.status == 200:
                        health = time.perf_counter() - started
                        first_episode(base, env)
                        return health, time.perf_counter() - started
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
        # Older checkouts left their row index process running after the server: a round's
        # leftovers would load the next rounds.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


CASES = ["--help", "serve --help", "import envbuilder.spec", "serve gsm8k", "serve 10M rows"]
EPISODE = " first episode"
"""A serve case's second figure: until its first whole episode is graded (same process)."""


def measure(checkout: Checkout, case: str, big_spec: Path, work: Path) -> dict[str, float]:
    """The case's figures: its own, and for a serve case also ``case + EPISODE``."""
    if case.endswith("--help"):
        return {case: timed_run(checkout, ["-m", "envbuilder", *case.split()])}
    if case == "import envbuilder.spec":
        return {case: timed_run(checkout, ["-c", "import envbuilder.spec"])}
    cache = Path(tempfile.mkdtemp(dir=work))  # fresh caches: the first start a user sees
    try:
        if case == "serve gsm8k":
            health, episode = time_to_health(checkout, checkout.root / "envs" / "gsm8k.yaml", "gsm8k", cache)
        else:
            health, episode = time_to_health(checkout, big_spec, "big", cache)
        return {case: health, case + EPISODE: episode}
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
                        for name, seconds in measure(tree, case, big_spec, work).items():
                            times.setdefault((tree.label, name), []).append(seconds)
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
            labels = [t.label for t in trees]
        shown = [name for case in cases for name in (case, case + EPISODE) if (labels[0], name) in times]
        table = render(labels, times, args.rounds, shown)
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
        "`/health` answers, fresh cache; first episode: until the first episode played right "
        "after it is graded, in the same process).",
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
