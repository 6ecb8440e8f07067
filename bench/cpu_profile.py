"""Server CPU per GSM8K episode as instructions, which other load on the machine does not move.

CPU seconds per episode swing by ±30 % on a shared 2-core machine, for the same commit from one
run to the next, which hides a regression of a few per cent. This counts the instructions the
server process executes in user space (valgrind's callgrind, switched on only while orsbench
plays the episodes), for this checkout and each ``--baseline`` checkout, one after the other:

    python bench/cpu_profile.py --baseline /path/to/old-checkout --episodes 300

At concurrency 1 (the default) the count is the same from run to run within about 0.2 %; at
higher concurrency it depends on how requests share the event loop's turns, so on the load.
System calls (the kernel's part, about a tenth of the server's CPU time here) are not counted.
A checkout whose plugins differ from the installed envbuilder's needs its own entry points on
its path (``pip install -e`` it in another virtualenv, or give it an ``*.dist-info`` folder).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}) before answering /health")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
            return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"the server did not answer /health in {timeout:g} s")


def _orsbench(shared: Path, port: int, episodes: int, concurrency: int) -> None:
    argv = [
        sys.executable,
        str(shared / "bench" / "orsbench.py"),
        *("--url", f"http://127.0.0.1:{port}", "--env", "gsm8k", "--split", "train", "--repeat", "1"),
        *("--micro-kinds", "", "--warmup", "0", "--episodes", str(episodes)),
        *("--episode-concurrency", str(concurrency), "--request-timeout", "600", "--phase-timeout", "3600"),
    ]
    subprocess.run(argv, check=True, capture_output=True)


def instructions(checkout: Path, args: argparse.Namespace, out: Path) -> int:
    """User-space instructions of ``checkout``'s server over ``args.episodes`` episodes."""
    out.mkdir(parents=True, exist_ok=True)
    dump = out / "callgrind.out"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    server = [sys.executable, "-m", "envbuilder", "serve", str(checkout / "envs" / "gsm8k.yaml")]
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={dump}",
        *server,
        *("--port", str(args.port)),
    ]
    # Started in the checkout: ``python -m`` puts the working directory first on sys.path.
    proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(args.port, proc, 900)
        # `serve` builds its FastAPI application after it listens: the OpenAPI document waits
        # for it, so no build is counted among the episodes' instructions.
        urllib.request.urlopen(f"http://127.0.0.1:{args.port}/openapi.json", timeout=900).close()
        _orsbench(args.shared, args.port, 50, args.concurrency)  # warm up: caches, lazy imports
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
        _orsbench(args.shared, args.port, args.episodes, args.concurrency)
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    total = 0
    for part in out.glob(f"{dump.name}*"):
        match = re.search(r"^totals: (\d+)", part.read_text(errors="replace"), re.MULTILINE)
        total = max(total, int(match.group(1))) if match else total
    if not total:
        raise SystemExit(f"no callgrind totals in {out}")
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="another checkout")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--port", type=int, default=8314)
    ap.add_argument("--keep", type=Path, default=None, help="keep the callgrind files here")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (Debian: apt-get install valgrind)")
    out = args.keep or Path(tempfile.mkdtemp(prefix="cpu_profile."))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for checkout in [ROOT, *(b.resolve() for b in args.baseline)]:
        print(f"[cpu_profile] {checkout}", file=sys.stderr, flush=True)
        rows.append((checkout, instructions(checkout, args, out / checkout.name) / args.episodes))
    first = rows[0][1]
    print(f"{args.episodes} GSM8K episodes at concurrency {args.concurrency}, user-space instructions:")
    for checkout, per in rows:
        print(f"  {per / 1e6:8.3f} M per episode  {per / first:6.3f}x  {checkout}")
    if args.keep is None:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
