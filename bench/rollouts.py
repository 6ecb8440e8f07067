"""Rollouts at trainer scale: GRPO-shaped load on `envbuilder serve`.

One GRPO step is P prompts x S samples = P*S sessions opened together (every sample of every
prompt in flight at once), each a multi-turn tool episode on envs/gsm8k_tools.yaml:

    create (split train, index = its prompt) -> calculator -> submit (wrong) -> submit (right) -> delete

Measured per run: episodes/s over the whole step, per-call p50/p99 (every request), errors,
server CPU per episode (the server process, plus redis-server when the store is Redis), and
memory per open session (RSS of the server, plus redis-server's, after every session has made
its first call, minus before the step). Runs at 64 and at 1,024 open sessions, with the
in-memory store and with Redis; and the reference ors-sdk server
(../shared/bench/servers/gsm8k_ors.py), which has only a one-shot `submit`, with the episode it
can do (create -> submit (right) -> delete) beside envbuilder's gsm8k.yaml doing the same.

    python bench/rollouts.py                       # all of the above
    python bench/rollouts.py --only memory --sizes 1024

The client is aiohttp in one process; on a 2-core machine it competes with the server, so the
absolute figures are a floor (see bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "envs"
TRAIN = ENVS / "data" / "gsm8k" / "train-00000-of-00001.parquet"
TEST = ENVS / "data" / "gsm8k" / "test-00000-of-00001.parquet"


CONNECTIONS = 0
"""Client connections shared by a step's sessions (0: one per session); set by --connections."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    cmd: list[str]
    url: str
    env: str
    episode: str  # "tools" or "submit"
    extra: list[psutil.Process] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", int(self.url.rsplit(":", 1)[1])), timeout=0.2):
                    pass
                import urllib.request

                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start")

    def processes(self) -> list[psutil.Process]:
        assert self.proc is not None
        me = psutil.Process(self.proc.pid)
        return [me, *me.children(recursive=True), *self.extra]

    def cpu(self) -> float:
        total = 0.0
        for p in self.processes():
            with_children = p.cpu_times()
            total += with_children.user + with_children.system
        return total

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in self.processes())

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def golds() -> list[str]:
    answers = pq.read_table(TRAIN, columns=["answer"]).column("answer").to_pylist()
    return [a.split("####")[-1].strip() for a in answers]


async def call(
    http: aiohttp.ClientSession, url: str, sid: str, name: str, args: dict[str, Any]
) -> dict[str, Any]:
    async with http.post(url, json={"name": name, "input": args}, headers={"X-Session-ID": sid}) as r:
        body = await r.text()
        if r.status != 200:
            raise RuntimeError(f"/call {r.status}: {body[:200]}")
    data, event = [], None
    for line in body.splitlines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event in ("chunk", "end"):
            data.append(line[5:].lstrip(" ") if not data else line[5:].removeprefix(" "))
        elif line.startswith("data:") and event == "error":
            raise RuntimeError(f"tool error: {line}")
    result = json.loads("".join(data))
    if not result.get("ok"):
        raise RuntimeError(f"tool refused: {result}")
    return dict(result["output"])


async def step(server: Server, prompts: int, samples: int, gold: list[str]) -> dict[str, Any]:
    """One GRPO step: prompts x samples sessions opened together, each run to its end."""
    n = prompts * samples
    latencies: list[float] = []
    errors: list[str] = []
    rewards: list[float | None] = []
    opened = asyncio.Event()
    first_calls = 0
    base = f"{server.url}/{server.env}"
    pool = CONNECTIONS or n  # default: a connection per session, as one client per rollout makes
    connector = aiohttp.TCPConnector(limit=pool, limit_per_host=pool)
    timeout = aiohttp.ClientTimeout(total=300)

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def timed(coro: Any) -> Any:
            t = time.perf_counter()
            try:
                return await coro
            finally:
                latencies.append(time.perf_counter() - t)

        async def post(path: str, sid: str, body: Any = None) -> Any:
            async with http.post(server.url + path, json=body, headers={"X-Session-ID": sid}) as r:
                text = await r.text()
                if r.status != 200:
                    raise RuntimeError(f"{path} {r.status}: {text[:200]}")
                return text

        async def episode(i: int) -> None:
            nonlocal first_calls
            sid = uuid.uuid4().hex
            index = i // samples
            answer = gold[index]
            try:
                await timed(post("/create", sid, {"env_name": server.env, "split": "train", "index": index}))
                if server.episode == "tools":
                    await timed(call(http, base + "/call", sid, "calculator", {"expression": "6*7"}))
                    first_calls += 1
                    if first_calls == n:
                        opened.set()
                    await opened.wait()  # every session open and holding state: memory is read now
                    await timed(call(http, base + "/call", sid, "submit", {"answer": str(int(answer) + 1)}))
                else:
                    first_calls += 1
                    if first_calls == n:
                        opened.set()
                    await opened.wait()
                out = await timed(call(http, base + "/call", sid, "submit", {"answer": answer}))
                rewards.append(out.get("reward"))
            except Exception as exc:  # counted, reported
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
                first_calls += 1
                if first_calls >= n:
                    opened.set()
            finally:
                try:
                    await timed(post("/delete", sid))
                except Exception as exc:
                    errors.append(f"delete {type(exc).__name__}: {exc}"[:200])

        rss0, cpu0 = server.rss(), server.cpu()
        t0 = time.perf_counter()
        tasks = [asyncio.create_task(episode(i)) for i in range(n)]
        await opened.wait()
        rss_open = server.rss()
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
        cpu = server.cpu() - cpu0
    latencies.sort()
    wrong_reward = [r for r in rewards if r != 1.0]
    return {
        "sessions": n,
        "episodes_per_s": n / wall,
        "call_p50_ms": 1000 * latencies[len(latencies) // 2],
        "call_p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "errors": len(errors) + len(wrong_reward),
        "error_samples": errors[:3] + [f"reward {r}" for r in wrong_reward[:3]],
        "server_cpu_ms_per_episode": 1000 * cpu / n,
        "kb_per_open_session": (rss_open - rss0) / 1024 / n,
        "calls": len(latencies),
    }


def start_redis() -> tuple[subprocess.Popen[bytes], int, str]:
    port = free_port()
    folder = tempfile.mkdtemp(prefix="rollouts-redis-")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    return proc, port, folder


def envbuilder_server(spec: str, env: str, episode: str, store: str = "memory") -> Server:
    port = free_port()
    exe = str(Path(sys.executable).with_name("envbuilder"))
    cmd = [exe, "serve", str(ENVS / spec), "--port", str(port), "--store", store, "--max-sessions", "100000"]
    return Server(
        f"envbuilder {spec} ({'redis' if store != 'memory' else 'memory'})",
        cmd,
        f"http://127.0.0.1:{port}",
        env,
        episode,
    )


def reference_server(ref_python: str, shared: Path) -> Server:
    port = free_port()
    cmd = [
        ref_python,
        str(shared / "servers" / "gsm8k_ors.py"),
        "--data",
        str(TRAIN),
        "--test-data",
        str(TEST),
        "--port",
        str(port),
    ]
    return Server("ors-sdk reference gsm8k", cmd, f"http://127.0.0.1:{port}", "gsm8kenvironment", "submit")


def run(server: Server, sizes: list[int], samples: int, rounds: int, gold: list[str]) -> list[dict[str, Any]]:
    server.start()
    out = []
    try:
        asyncio.run(step(server, 4, 4, gold))  # warm-up
        for _ in range(rounds):
            for n in sizes:
                result = asyncio.run(
                    step(server, n // samples if n >= samples else n, samples if n >= samples else 1, gold)
                )
                result["server"] = server.name
                out.append(result)
                print(json.dumps(result), file=sys.stderr, flush=True)
    finally:
        server.stop()
    return out


def inproc_paths(count: int) -> list[tuple[str, Any, float]]:
    """The in-process paths on ``count`` GSM8K gold answers: ``(name, run, prompts)``, where
    ``prompts`` is the prompts the path renders per answer (its own work beside the grade). The
    first is the grader called directly (the reference), the second the task's prompt rendered
    alone (what a path that must render one pays for it)."""
    from envbuilder.environment import load_environment
    from envbuilder.inprocess import text_of
    from envbuilder.integrations import skyrl, trl, verl
    from envbuilder.threadloop import run_sync as run_on_loop

    spec = ENVS / "gsm8k.yaml"
    env = load_environment(spec)
    assert env.submit is not None
    gold = golds()
    view = env.split("train")
    grader = env.submit.grader

    async def direct() -> None:
        for i in range(count):
            await grader.grade(f"The answer is {gold[i]}.", view.task(i), {})

    def render() -> None:
        # What an episode on a new task must also do: render its prompt (TRL returns it from
        # reset; the other adapters take the prompt from the trainer's dataset)
        for i in range(count):
            text_of(env.prompt(view.task(i)))

    def via_trl() -> None:
        rollout = trl.TRLSpec(spec, num_tasks=count).environment_factory()
        for i in range(count):
            rollout.reset(task_index=i)
            rollout.submit(answer=f"The answer is {gold[i]}.")

    def via_trl_group(samples: int = 8) -> None:
        # GRPO's shape: each task reset once per sample of its group (the prompt renders once)
        rollout = trl.TRLSpec(spec, num_tasks=count).environment_factory()
        for i in range(count):
            rollout.reset(task_index=i // samples)
            rollout.submit(answer=f"The answer is {gold[i // samples]}.")

    where = str(spec)  # (a dataset row's column: a string already, not built per answer)

    def via_skyrl() -> None:
        for i in range(count):
            e = skyrl.EnvbuilderTextEnv(extras={"spec": where, "split": "train", "task_index": i})
            e.init([{"role": "user", "content": "x"}])
            e.step(f"The answer is {gold[i]}.")
            e.close()

    def via_verl() -> None:
        for i in range(count):
            verl.compute_score(
                "gsm8k", f"The answer is {gold[i]}.", "", {"spec": where, "split": "train", "index": i}
            )

    paths: list[tuple[str, Any, float]] = [
        ("grader.grade directly", lambda: run_on_loop(direct()), 0.0),
        ("the task's prompt rendered", render, 0.0),
        ("TRL environment_factory (reset + submit)", via_trl, 1.0),
        ("TRL, a group of 8 samples per task", via_trl_group, 1 / 8),
        ("SkyRL BaseTextEnv (init + step + close)", via_skyrl, 0.0),
        ("verl compute_score", via_verl, 0.0),
    ]
    try:
        import verifiers as vf

        from envbuilder.integrations import verifiers as vf_spec
    except ImportError:
        print("verifiers is not installed: skipping its adapter", file=sys.stderr)
    else:
        vf_env = vf_spec.load_environment(spec, split="train", num_tasks=count)  # renders the dataset once

        # The model's replies as verifiers' rollout loop hands them over: its own pydantic
        # messages, which it builds whatever the environment (12 k instructions each), so
        # made before the count, not in it (the other paths are handed a plain string)
        completions = [
            [vf.AssistantMessage(role="assistant", content=f"The answer is {gold[i]}.")] for i in range(count)
        ]

        async def verifiers_rollouts() -> None:
            for i in range(count):
                state: dict[str, Any] = {"info": {"task_index": i}}
                await vf_env.setup_state(state)
                state["completion"] = completions[i]
                await vf_env.end_episode(state)

        paths.append(
            ("verifiers SpecEnv (setup_state + end_episode)", lambda: run_on_loop(verifiers_rollouts()), 0.0)
        )
    return paths


def inproc(count: int, instructions: bool = False) -> str:
    """CPU per graded answer on GSM8K: the grader called directly, against each in-process
    adapter driving a whole episode (task read, episode state, the submit tool, the reward).

    Two figures per path: CPU µs (best of 3; swings with the machine's load) and Python function
    calls per answer under cProfile (the same from run to run on a busy machine); with
    ``instructions``, a third: user-space instructions per answer under valgrind's callgrind
    (:func:`inproc_instructions`), which the load does not move either."""
    import cProfile
    import pstats

    paths = inproc_paths(count)
    counted = inproc_instructions(count) if instructions else {}

    def cpu(fn: Any) -> float:
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            fn()
            best = min(best, time.process_time() - t)
        return 1e6 * best / count

    def calls(fn: Any) -> float:
        profile = cProfile.Profile()
        profile.enable()
        fn()
        profile.disable()
        return float(pstats.Stats(profile).total_calls) / count  # type: ignore[attr-defined]

    (base_name, base_fn, _), (drawn_name, drawn_fn, _) = paths[:2]
    base, base_calls = cpu(base_fn), calls(base_fn)
    drawn, drawn_calls = cpu(drawn_fn), calls(drawn_fn)
    base_instr = counted.get(base_name, 0.0)
    extra = " | instructions per answer | vs the grader alone" if counted else ""

    def instr(name: str) -> str:
        if not counted:
            return ""
        return f" | {counted[name] / 1e3:,.0f} k | {counted[name] / base_instr:.2f}×"

    rows = [
        "| path | CPU µs per graded answer | vs the grader alone "
        f"| Python calls per answer | vs the grader alone | calls vs its own work (grade + prompts){extra} |",
        "|---|---|---|---|---|---|" + ("---|---|" if counted else ""),
        f"| {base_name} | {base:,.0f} | 1.00× | {base_calls:,.0f} | 1.00× | 1.00×{instr(base_name)} |",
        f"| {drawn_name} | {drawn:,.0f} | | {drawn_calls:,.0f} | | {instr(drawn_name)} |",
    ]
    for name, fn, prompts in paths[2:]:
        value, n = cpu(fn), calls(fn)
        own = base_calls + prompts * drawn_calls
        ratios = f"{value / base:.2f}× | {n:,.0f} | {n / base_calls:.2f}× | {n / own:.2f}×"
        rows.append(f"| {name} | {value:,.0f} | {ratios}{instr(name)} |")
    return "\n".join(rows)


def inproc_instructions(count: int) -> dict[str, float]:
    """User-space instructions per answer of each in-process path, by name: this script run
    again under valgrind's callgrind (``--callgrind-paths``), counting only inside
    ``functools.reduce``, which runs each path once after a warm-up run of it, and dumping the
    count at each ``oct()`` after it (one file per path, in order)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    folder = Path(tempfile.mkdtemp(prefix="rollouts-callgrind."))
    try:
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            "--dump-before=builtin_oct",
            f"--callgrind-out-file={folder}/callgrind.out",
            sys.executable,
            __file__,
            "--callgrind-paths",
            "--inproc-count",
            str(count),
        ]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        names = [
            line.removeprefix("path: ") for line in done.stdout.splitlines() if line.startswith("path: ")
        ]
        totals = []
        for i in range(1, len(names) + 1):
            text = (folder / f"callgrind.out.{i}").read_text(errors="replace")
            match = re.search(r"^totals: (\d+)", text, re.MULTILINE)
            totals.append(int(match.group(1)) if match else 0)
        return {name: total / count for name, total in zip(names, totals, strict=True)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def callgrind_paths(count: int) -> None:
    """Under :func:`inproc_instructions`' valgrind: each path warmed up, then run once inside
    ``functools.reduce`` (where callgrind counts), its name printed and its count dumped."""
    for name, fn, _ in inproc_paths(count):
        fn()
        functools.reduce(lambda _, __: fn(), [0], None)
        print(f"path: {name}", flush=True)
        oct(0)  # (callgrind dumps the count before this call)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 1024], help="sessions open at once")
    parser.add_argument("--samples", type=int, default=16, help="samples per prompt (GRPO group size)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=["memory", "redis", "reference", "inproc"], action="append")
    parser.add_argument("--inproc-count", type=int, default=2000, help="answers per in-process path")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="with inproc: also count each path's instructions under valgrind's callgrind",
    )
    parser.add_argument("--callgrind-paths", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ref-python", default=sys.executable, help="a Python with ors-sdk and pandas")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "bench")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument(
        "--connections", type=int, default=0, help="connections shared by a step's sessions (0: one each)"
    )
    args = parser.parse_args()
    if args.callgrind_paths:  # (inproc_instructions' child, under valgrind)
        callgrind_paths(args.inproc_count)
        return
    global CONNECTIONS
    CONNECTIONS = args.connections
    only = set(args.only or ["memory", "redis", "reference", "inproc"])
    gold = golds()
    results: list[dict[str, Any]] = []
    if "memory" in only:
        results += run(
            envbuilder_server("gsm8k_tools.yaml", "gsm8k-tools", "tools"),
            args.sizes,
            args.samples,
            args.rounds,
            gold,
        )
    if "redis" in only:
        if shutil.which("redis-server") is None:
            print("redis-server is not installed: skipping the Redis store", file=sys.stderr)
        else:
            proc, port, folder = start_redis()
            try:
                server = envbuilder_server(
                    "gsm8k_tools.yaml", "gsm8k-tools", "tools", f"redis://127.0.0.1:{port}/0"
                )
                server.extra = [psutil.Process(proc.pid)]
                results += run(server, args.sizes, args.samples, args.rounds, gold)
            finally:
                proc.terminate()
                proc.wait(10)
                shutil.rmtree(folder, ignore_errors=True)
    if "reference" in only:
        if not (args.shared / "servers" / "gsm8k_ors.py").exists():
            print(f"no reference server under {args.shared}: skipping it", file=sys.stderr)
        else:
            results += run(
                reference_server(args.ref_python, args.shared), args.sizes, args.samples, args.rounds, gold
            )
            results += run(
                envbuilder_server("gsm8k.yaml", "gsm8k", "submit"),
                args.sizes,
                args.samples,
                args.rounds,
                gold,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if results:
        print(table(results))
    if "inproc" in only:
        print(inproc(args.inproc_count, args.instructions))


def table(results: list[dict[str, Any]]) -> str:
    rows = {}
    for r in results:
        rows.setdefault((r["server"], r["sessions"]), []).append(r)
    header = (
        "| server | open sessions | episodes/s | call p50 ms | call p99 ms | p99/p50 | errors "
        "| server CPU ms/episode | KB per open session (max) |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for (name, n), rs in rows.items():
        keys = ("episodes_per_s", "call_p50_ms", "call_p99_ms", "server_cpu_ms_per_episode")
        med = {k: statistics.median(r[k] for r in rs) for k in keys}
        # Memory: the largest growth (a later round reuses the memory an earlier one freed).
        med["kb_per_open_session"] = max(r["kb_per_open_session"] for r in rs)
        p50, p99 = med["call_p50_ms"], med["call_p99_ms"]
        lines.append(
            f"| {name} | {n:,} | {med['episodes_per_s']:,.0f} | {p50:.1f} | {p99:.1f} | {p99 / p50:.1f} "
            f"| {sum(r['errors'] for r in rs)} | {med['server_cpu_ms_per_episode']:.2f} "
            f"| {med['kb_per_open_session']:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
