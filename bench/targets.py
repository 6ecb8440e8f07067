"""The dataset targets of issue 3 on a big Parquet file that envbuilder has never seen.

Measures: ready time (process start → first /health 200 and num_tasks answered); random /task
latency while the background row index builds and after it; the index build time; server RSS
after 10,000 random reads; /health latency while POST /tasks streams 1M rows.

    python bench/targets.py /tmp/big/gsm8k_10m.parquet
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
PORT = 8103
URL = f"http://127.0.0.1:{PORT}"

SPEC = """name: big
dataset: {{type: parquet, files: {{train: {path}}}}}
splits:
  train: {{type: train}}
  million: {{type: test, source: train, slice: "[:1000000]"}}
prompt: {{template: "{{{{ question }}}}"}}
grader: {{type: exact_match, target: "{{{{ answer }}}}"}}
"""


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1e3


def main() -> None:
    big = Path(sys.argv[1]).resolve()
    work = Path(tempfile.mkdtemp())
    spec = work / "big.yaml"
    spec.write_text(SPEC.format(path=big))
    env = {**os.environ, "ENVBUILDER_CACHE_DIR": str(work / "cache")}  # the first time: no cache
    env["ENVBUILDER_DATA_ROOTS"] = str(big.parent)  # the spec is written apart from the big file
    cmd = [
        str(Path(sys.executable).parent / "envbuilder"),
        "serve",
        str(spec),
        "--port",
        str(PORT),
        "--host",
        "127.0.0.1",
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=URL, timeout=60) as c:
            while True:
                try:
                    if c.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.005)
            n = c.post("/big/num_tasks", json={"split": "train"}).json()["num_tasks"]
            ready = time.perf_counter() - t0
            print(f"ready (first /health 200 + num_tasks={n:,}): {ready:.2f} s")
            rows = work / "cache" / "rows"
            during: list[float] = []
            while not (rows.is_dir() and any(p.suffix == ".arrow" for p in rows.iterdir())):
                i = random.randrange(n)
                t = time.perf_counter()
                assert c.post("/big/task", json={"split": "train", "index": i}).status_code == 200
                during.append(time.perf_counter() - t)
                time.sleep(0.02)
            built = time.perf_counter() - t0
            print(
                f"row index built {built:.1f} s after start; /task meanwhile: n={len(during)} "
                f"p50 {pct(during, 0.5):.2f} ms p99 {pct(during, 0.99):.2f} ms"
            )
            time.sleep(0.5)
            lat = []
            for _ in range(10_000):
                i = random.randrange(n)
                t = time.perf_counter()
                c.post("/big/task", json={"split": "train", "index": i})
                lat.append(time.perf_counter() - t)
            rss = psutil.Process(proc.pid).memory_info().rss / 2**20
            print(
                f"random /task, concurrency 1, 10,000 reads: p50 {pct(lat, 0.5):.3f} ms "
                f"p99 {pct(lat, 0.99):.3f} ms; server RSS after: {rss:.0f} MB"
            )
            health: list[float] = []
            done = threading.Event()
            size = [0]

            def stream() -> None:
                with (
                    httpx.Client(base_url=URL, timeout=600) as s,
                    s.stream("POST", "/big/tasks", json={"split": "million"}) as r,
                ):
                    for chunk in r.iter_bytes():
                        size[0] += len(chunk)
                done.set()

            th = threading.Thread(target=stream)
            ts = time.perf_counter()
            th.start()
            while not done.is_set():
                t = time.perf_counter()
                c.get("/health")
                health.append(time.perf_counter() - t)
                time.sleep(0.01)
            th.join()
            print(
                f"/tasks of 1M rows: {size[0] / 2**20:.0f} MB in {time.perf_counter() - ts:.1f} s; "
                f"/health meanwhile: n={len(health)} p50 {pct(health, 0.5):.2f} ms "
                f"p99 {pct(health, 0.99):.2f} ms max {max(health) * 1e3:.1f} ms"
            )
            rss = psutil.Process(proc.pid).memory_info().rss / 2**20
            print(f"server RSS after streaming: {rss:.0f} MB")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
