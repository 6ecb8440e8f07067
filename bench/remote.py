"""A 10M-row Parquet on an S3-compatible server (moto): the first start (download + row index) and
every later start (ready to serve), against the same file on the local disk.

Each round, interleaved: a fresh cache, ``envbuilder serve`` of a spec whose data is
``s3://bench/gsm8k_10m.parquet``; ready = process start → ``/health`` 200, ``num_tasks`` and one
random ``/task`` answered; then the time until the row index is in the cache; then the process is
stopped and started again on the same cache (the "after its first download and index" case),
and the local-file spec is started on a warm cache as the floor.

    python bench/remote.py bench/big/gsm8k_10m.parquet --rounds 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import free_port  # noqa: E402
from tests.stores import moto_s3  # noqa: E402

SPEC = """name: big
dataset: {{type: parquet, files: {{train: "{data}"}}}}
splits:
  train: {{type: train}}
prompt: {{template: "{{{{ question }}}}"}}
grader: {{type: exact_match, target: "{{{{ answer }}}}"}}
"""


def start(spec: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float, int, float]:
    """Start ``envbuilder serve spec``; (process, seconds until ready, num_tasks, CPU seconds the
    server used until then: the figure the machine's load does not inflate)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "envbuilder", "serve", str(spec), "--host", "127.0.0.1", "--port", str(port)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with httpx.Client(base_url=url, timeout=600) as c:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"envbuilder serve {spec} exited {proc.returncode}")
            try:
                if c.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.005)
        n = c.post("/big/num_tasks", json={"split": "train"}).json()["num_tasks"]
        r = c.post("/big/task", json={"split": "train", "index": random.randrange(n)})
        assert r.status_code == 200, r.text
    ready = time.perf_counter() - t0
    cpu = psutil.Process(proc.pid).cpu_times()
    return proc, ready, n, cpu.user + cpu.system


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def wait_index(cache: Path, timeout: float = 1200) -> None:
    rows = cache / "rows"
    deadline = time.monotonic() + timeout
    while not (
        rows.is_dir() and any(p.suffix == ".arrow" and not p.name.startswith(".") for p in rows.iterdir())
    ):
        if time.monotonic() > deadline:
            raise SystemExit("the row index was not built")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("big", type=Path, help="the 10M-row Parquet (../shared/tools/make_big_parquet.py)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envbuilder-bench-remote-"))
    size = args.big.stat().st_size
    with moto_s3("bench") as s3:
        os.environ.update(s3)
        import s3fs

        t = time.perf_counter()
        # One PUT: moto's multipart completion of a 1 GB object fails ("seek of closed file").
        s3fs.S3FileSystem(skip_instance_cache=True).put_file(
            str(args.big), "bench/gsm8k_10m.parquet", chunksize=1 << 32
        )
        print(f"uploaded {size / 1e6:,.0f} MB to moto in {time.perf_counter() - t:.1f} s")
        remote_spec, local_spec = work / "remote.yaml", work / "local.yaml"
        remote_spec.write_text(SPEC.format(data="s3://bench/gsm8k_10m.parquet"))
        local_spec.write_text(SPEC.format(data=args.big.resolve()))
        # The local spec names the big file where it lies, outside the spec's folder: allow it.
        os.environ["ENVBUILDER_DATA_ROOTS"] = str(args.big.resolve().parent)
        local_cache = work / "local-cache"
        proc, *_ = start(local_spec, {**os.environ, "ENVBUILDER_CACHE_DIR": str(local_cache)})
        wait_index(local_cache)  # the local floor runs on a warm cache, as the remote second start
        stop(proc)
        got: dict[str, list[float]] = {k: [] for k in ("first", "indexed", "again", "local")}
        cpu: dict[str, list[float]] = {k: [] for k in ("first", "again", "local")}
        for r in range(args.rounds):
            cache = work / f"cache-{r}"
            env = {**os.environ, "ENVBUILDER_CACHE_DIR": str(cache)}
            t0 = time.perf_counter()
            proc, first, n, cpu_first = start(remote_spec, env)
            wait_index(cache)
            indexed = time.perf_counter() - t0
            stop(proc)
            proc, again, _, cpu_again = start(remote_spec, env)
            stop(proc)
            proc, local, _, cpu_local = start(
                local_spec, {**os.environ, "ENVBUILDER_CACHE_DIR": str(local_cache)}
            )
            stop(proc)
            for key, value in zip(got, (first, indexed, again, local), strict=True):
                got[key].append(value)
            for key, value in zip(cpu, (cpu_first, cpu_again, cpu_local), strict=True):
                cpu[key].append(value)
            print(
                f"round {r + 1}: {n:,} rows; first start ready {first:.2f} s (CPU {cpu_first:.2f} s), "
                f"index cached {indexed:.1f} s; next start ready {again:.2f} s (CPU {cpu_again:.2f} s); "
                f"local file ready {local:.2f} s (CPU {cpu_local:.2f} s)",
                flush=True,
            )
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(
        f"\nmedians of {args.rounds} interleaved rounds, {size / 1e6:,.0f} MB Parquet, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}:"
    )
    print("| case | ready s (wall) | server CPU s until ready |")
    print("|---|---|---|")
    print(f"| first start from S3 (download, footers) | {med['first']:.2f} | {mcpu['first']:.2f} |")
    print(f"| … until the row index is in the cache | {med['indexed']:.1f} | |")
    print(
        f"| every later start from S3 (HEAD for the ETag; cached copy and index) | {med['again']:.2f} "
        f"| {mcpu['again']:.2f} |"
    )
    print(f"| the same file on the local disk, warm cache | {med['local']:.2f} | {mcpu['local']:.2f} |")
    print(
        f"\nlater S3 start / local start: wall {med['again'] / med['local']:.2f}×, "
        f"CPU {mcpu['again'] / mcpu['local']:.2f}×"
    )


if __name__ == "__main__":
    main()
