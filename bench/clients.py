"""envbuilder's own ORS clients at high concurrency: CPU per request, wall time, memory, hangs.

N requests are put in flight at once (``--inflight``, default 64 1024 4096 16384) through ONE
client, each one ``POST /{env}/task`` (a small JSON answer, so the client's own cost shows):

- ``async``: one :class:`envbuilder.client.AsyncClient`, N coroutines on one event loop;
- ``sync``: one :class:`envbuilder.client.Client`, N threads (capped by ``--max-threads``);
- ``eval``: ``envbuilder eval run envs/gsm8k.yaml --concurrency N`` in process, N episodes (the
  first 1,024 test tasks, N/1,024 samples each), each one call to a model endpoint that answers
  after 1 s (``slow`` only): the eval process's CPU per episode.

against two servers, both separate processes:

- ``serve``: ``envbuilder serve envs/gsm8k.yaml`` (a real server answering at once);
- ``slow``: a tiny ASGI app (uvicorn) that answers every request after 1 s, so every request
  waits on the pool for a free connection when N exceeds it.

Each (code, client, server, N) runs in a fresh Python process so its CPU (user+sys of that
process), peak RSS and connections are its own; the pool's connections are opened before the
clock starts (N requests at N in flight would otherwise count a connect per request at 64).
``--old REF`` also runs the same load with the client of git ref REF (extracted with
``git archive`` and put first on ``sys.path``) in the same run, for an old-versus-new table on
the same loaded machine. ``--staggered`` (sync) starts the threads one at a time, each calling
at once, instead of releasing all N together from a barrier. A run that has not finished after
``--deadline`` seconds is reported as a hang.

    python bench/clients.py --old integ
    python bench/clients.py --inflight 64 1024 --servers serve --clients async
    python bench/clients.py --servers slow --clients sync --inflight 64 --repeat 7 --old main
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import resource
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SLOW_APP = """
import asyncio, json

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    while (await receive()).get("more_body"):
        pass
    path = scope["path"]
    if path == "/health":
        body = b"ok"
    elif path.endswith("/chat/completions"):
        await asyncio.sleep(1.0)
        message = {"role": "assistant", "content": "The answer is 0."}
        body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "slow",
                           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                     "total_tokens": 15}}).encode()
    else:
        await asyncio.sleep(1.0)
        body = json.dumps(["slow"] if path == "/list_environments" else {"task": {"i": 1}}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    import urllib.request

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server at {url} exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server at {url} did not start")


def start_server(kind: str, folder: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if kind == "serve":
        cmd = [sys.executable, "-m", "envbuilder", "serve", str(ROOT / "envs" / "gsm8k.yaml")]
        cmd += ["--host", "127.0.0.1", "--port", str(port)]
        env_name = "gsm8k"
    else:
        (folder / "slow_app.py").write_text(SLOW_APP)
        cmd = [sys.executable, "-m", "uvicorn", "slow_app:app", "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--log-level", "warning", "--no-access-log", "--backlog", "65535"]
        cmd += ["--app-dir", str(folder)]
        env_name = "slow"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    wait_up(url, proc)
    return proc, url, env_name


# ---------------------------------------------------------------------------------------------
# One measurement, in its own process (``--child``): prints one JSON line.


def connections_to(port: int) -> int:
    """This process's established TCP connections to ``port`` (Linux /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                remote, state, inode = parts[2], parts[3], parts[9]
                if state == "01" and inode in inodes and int(remote.rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


def progress(done: int) -> None:
    """Requests finished so far, on stderr: a run past its deadline that kept finishing
    requests is slow (a loaded machine), one that stopped is a hang."""
    print(f"done {done} {time.monotonic():.1f}", file=sys.stderr, flush=True)


def child(mode: str, url: str, env_name: str, inflight: int) -> dict[str, Any]:
    from envbuilder.client import AsyncClient, Client

    client_cpu = loop_cpu = 0.0
    loop_switched = 0
    port = int(url.rsplit(":", 1)[1])
    errors: list[str] = []
    peak_connections = 0
    # the bench's own /proc scans, taken out of the process's CPU: the scanning thread's own
    # time (the process's would also take out what the client's threads ran meanwhile)
    scan_cpu = 0.0

    def scan() -> int:
        nonlocal scan_cpu
        c = time.thread_time()
        found = connections_to(port)
        scan_cpu += time.thread_time() - c
        return found

    def switches() -> tuple[int, int]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_nvcsw, usage.ru_nivcsw

    t0 = time.perf_counter()
    c0 = time.process_time()
    switches0 = switches()
    if mode == "eval":
        return eval_child(url, inflight)
    # --calls: Python function calls per request (cProfile, async only: the one thread), a count
    # the machine's load does not move, where CPU seconds swing with it
    profile = cProfile.Profile() if os.environ.get("BENCH_CALLS") and mode == "async" else None
    if mode == "async":

        async def main() -> None:
            nonlocal peak_connections, t0, c0, switches0
            async with AsyncClient(url) as client:
                env = client.environment(env_name)
                await env.name()
                # open the pool's connections first: N requests at N in flight would otherwise
                # count one connect per request at 64 and one per 40 at 4,096
                await asyncio.gather(*(env.task("test", i) for i in range(min(inflight, 100))))
                t0, c0 = time.perf_counter(), time.process_time()  # the client's set-up is not per request
                switches0 = switches()
                if profile is not None:
                    profile.enable()

                done = 0
                all_done = asyncio.Event()

                async def one(i: int) -> None:
                    nonlocal done
                    try:
                        await env.task("test", i % 1000)
                    except Exception as exc:  # counted and reported
                        errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    done += 1
                    if done == inflight:
                        all_done.set()

                # O(1) per check: asyncio.wait(tasks) every 2 s would cost O(N) each time (a done
                # callback added to and removed from every task), counted as the client's CPU.
                tasks = [asyncio.create_task(one(i)) for i in range(inflight)]
                while not all_done.is_set():
                    if profile is not None:
                        profile.disable()  # the bench's own scans are not the client's calls
                    peak_connections = max(peak_connections, scan())
                    if profile is not None:
                        profile.enable()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(all_done.wait(), 2.0)
                    progress(done)
                await asyncio.gather(*tasks)
                if profile is not None:
                    profile.disable()

        asyncio.run(main())
    else:
        threading.stack_size(256 * 1024)  # 16,384 threads: their stacks, not the client, set RSS
        with Client(url) as client:
            env = client.environment(env_name)
            _ = env.name
            warm = [threading.Thread(target=env.task, args=("test", i)) for i in range(min(inflight, 100))]
            for t in warm:
                t.start()
            for t in warm:
                t.join()  # the pool's connections opened first, as in the async case
            # --staggered: each thread calls as soon as it has started (thread starts are one at
            # a time), so no crowd of N threads is made ready at once by the harness; the thread
            # starts are then inside the measured window.
            staggered = bool(os.environ.get("BENCH_STAGGERED"))
            start = threading.Barrier(1 if staggered else inflight + 1)

            finished = threading.Semaphore(0)
            # The client's own CPU: each caller thread's inside the call (user+sys of that thread,
            # its waits for the interpreter lock included) plus the client's loop thread. The
            # process's CPU also counts the harness: the barrier wakes every thread at once, and
            # N threads ready to run each wake every 5 ms (the switch interval) to ask for the
            # interpreter lock, a cost that grows with N whatever the threads then call.
            inside = [0.0] * inflight
            loop_clock = time.pthread_getcpuclockid(client._portal.thread.ident or 0)
            loop_tid = client._portal.thread.native_id

            def loop_switches() -> int:
                """The loop thread's context switches so far (voluntary and not)."""
                with open(f"/proc/self/task/{loop_tid}/status") as f:
                    return sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)

            def one(i: int) -> None:
                if not staggered:
                    start.wait()
                c = time.thread_time()
                try:
                    env.task("test", i % 1000)
                except Exception as exc:  # counted and reported
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                inside[i] = time.thread_time() - c
                finished.release()

            threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(inflight)]
            if not staggered:
                for t in threads:
                    t.start()
            t0, c0 = time.perf_counter(), time.process_time()  # thread start-up is not the client's
            switches0 = switches()
            loop0 = time.clock_gettime(loop_clock)
            loop_switches0 = loop_switches()
            if staggered:
                for t in threads:
                    t.start()
            else:
                start.wait()
            done = 0
            while done < inflight:  # O(1) per check, as above
                peak_connections = max(peak_connections, scan())
                deadline = time.monotonic() + 2.0
                while done < inflight and finished.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    done += 1
                progress(done)
            for t in threads:
                t.join()
            loop_cpu = time.clock_gettime(loop_clock) - loop0
            loop_switched = loop_switches() - loop_switches0
            client_cpu = sum(inside) + loop_cpu
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0 - scan_cpu
    usage = resource.getrusage(resource.RUSAGE_SELF)
    nvcsw, nivcsw = usage.ru_nvcsw - switches0[0], usage.ru_nivcsw - switches0[1]
    client_cpu_of = (
        {}
        if mode != "sync"
        else {
            "client_cpu_ms_per_request": 1000 * client_cpu / inflight,
            "loop_cpu_ms_per_request": 1000 * loop_cpu / inflight,  # of it, the loop thread's
            "loop_switches_per_request": loop_switched / inflight,
        }
    )
    calls = {} if profile is None else {"calls_per_request": pstats.Stats(profile).total_calls / inflight}  # type: ignore[attr-defined]
    return {
        **calls,
        **client_cpu_of,
        "wall_s": wall,
        "cpu_ms_per_request": 1000 * cpu / inflight,
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_connections": peak_connections,
        "scan_cpu_s": scan_cpu,
        # the process's threads: how often they slept and were woken (voluntary) or preempted
        "voluntary_switches_per_request": nvcsw / inflight,
        "involuntary_switches_per_request": nivcsw / inflight,
    }


def eval_child(url: str, inflight: int) -> dict[str, Any]:
    """``envbuilder eval run`` on GSM8K test in process, ``inflight`` episodes at once, each one
    model call to the slow endpoint (1 s); the eval process's CPU per episode."""
    limit = min(inflight, 1024)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.jsonl"
        cmd = [sys.executable, "-m", "envbuilder", "eval", "run", str(ROOT / "envs" / "gsm8k.yaml")]
        cmd += ["--model", "slow", "--base-url", f"{url}/v1", "--answer", "text", "--max-turns", "1"]
        cmd += ["--limit", str(limit), "--samples", str(inflight // limit), "--concurrency", str(inflight)]
        cmd += ["--out", str(out), "--progress-every", "5"]
        env = dict(os.environ, OPENAI_API_KEY="sk-local", HF_HUB_OFFLINE="1")
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        lines = out.read_text().splitlines() if out.exists() else []
        records = [r for r in map(json.loads, lines) if "index" in r and "run" not in r]  # no header
    errors = [r for r in records if r.get("error")]
    return {
        "wall_s": wall,
        "cpu_ms_per_request": 1000 * (usage.ru_utime + usage.ru_stime) / inflight,
        "errors": len(errors) + (inflight - len(records)),
        "first_error": (
            errors[0]["error"] if errors else done.stderr.strip()[-200:] if done.returncode else ""
        ),
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "peak_connections": None,
        "episodes": len(records),
    }


# ---------------------------------------------------------------------------------------------


def extract(ref: str, into: Path) -> Path:
    """The package ``envbuilder`` of git ref ``ref``, extracted under ``into``."""
    archive = into / "old.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "envbuilder"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "old", filter="data")
    return into / "old"


def measure(code: Path | None, mode: str, url: str, env_name: str, n: int, deadline: float) -> dict[str, Any]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = f"{code}{os.pathsep}{env.get('PYTHONPATH', '')}"
    cmd = [sys.executable, __file__, "--child", mode, url, env_name, str(n)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, env=env)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        marks = [line.split() for line in err.splitlines() if line.startswith("done ")]
        done_by = int(marks[-1][1]) if marks else 0
        stalled = len(marks) > 15 and marks[-1][1] == marks[-16][1]  # nothing finished in 30 s
        return {"hang" if stalled or not done_by else "not_done": True, "done_by_deadline": done_by}
    if done.returncode != 0:
        return {"crash": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--inflight", type=int, nargs="+", default=[64, 1024, 4096, 16384])
    parser.add_argument("--servers", nargs="+", default=["serve", "slow"], choices=["serve", "slow"])
    parser.add_argument(
        "--clients", nargs="+", default=["async", "sync", "eval"], choices=["async", "sync", "eval"]
    )
    parser.add_argument("--max-threads", type=int, default=16384, help="sync runs above this are skipped")
    parser.add_argument("--old", help="also run the client of this git ref (e.g. integ)")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds before a run is a hang")
    parser.add_argument("--calls", action="store_true", help="count Python calls per request (async)")
    parser.add_argument(
        "--staggered", action="store_true", help="sync: start each thread calling, no barrier (see child)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each (code, client, N) this many times (a row each)"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calls:
        os.environ["BENCH_CALLS"] = "1"
    if args.staggered:
        os.environ["BENCH_STAGGERED"] = "1"
    if args.child:
        mode, url, env_name, n = args.child
        print(json.dumps(child(mode, url, env_name, int(n))))
        return
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        codes: list[tuple[str, Path | None]] = [("new", None)]
        if args.old:
            codes.insert(0, (f"old ({args.old})", extract(args.old, Path(tmp))))
        for kind in args.servers:
            proc, url, env_name = start_server(kind, Path(tmp))
            try:
                for mode in args.clients:
                    if mode == "eval" and kind != "slow":
                        continue  # eval's model endpoint is the slow one
                    for n in args.inflight:
                        if mode == "sync" and n > args.max_threads:
                            continue
                        for _ in range(args.repeat):  # (alternating the codes each time)
                            for label, code in codes:
                                row = measure(code, mode, url, env_name, n, args.deadline)
                                row.update(code=label, client=mode, server=kind, inflight=n)
                                print(json.dumps(row), flush=True)
            finally:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
