"""Python function calls per GSM8K episode through the server's lean door, in process (no
uvicorn, no sockets; cProfile on the main thread), for this checkout and each ``--baseline``:

    python bench/call_count.py --baseline /path/to/main-checkout --episodes 300

A count of calls, unlike CPU seconds or callgrind's instructions, does not move with other load
on the machine or with background work (the row index, the reaper): on a loaded two-core machine
``cpu_profile.py`` gave 1.75 against 3.00 M instructions per episode in one run and 11.3
against 1.89 M in the next, for the same two checkouts. It counts Python-level calls only
(builtins included, not their cost), so it says whether the hot path does more work, not how
much more time it takes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _measure(episodes: int) -> float:
    from envbuilder.environment import load_environment
    from envbuilder.server import create_app

    env = load_environment("envs/gsm8k.yaml")
    app = create_app([env])
    answer = env.split("train").task(0)["answer"].split("####")[-1].strip()

    async def request(
        method: str, path: str, body: bytes = b"", headers: tuple[Any, ...] = ()
    ) -> tuple[int, bytes]:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            raise AssertionError

        out: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            out.append(message)

        hdrs = [(b"content-type", b"application/json"), (b"host", b"t"), *headers]
        if body:
            hdrs.append((b"content-length", str(len(body)).encode()))
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "headers": hdrs, "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        await app(scope, receive, send)
        return out[0]["status"], b"".join(m.get("body", b"") for m in out[1:])

    async def episode() -> None:
        _, body = await request("POST", "/create_session")
        sid = body.split(b"data: ", 1)[1].split(b"\r\n", 1)[0]
        h = ((b"x-session-id", sid),)
        create = json.dumps({"env_name": "gsm8k", "split": "train", "index": 0}).encode()
        assert (await request("POST", "/create", create, h))[0] == 200
        assert (await request("GET", "/gsm8k/prompt", b"", h))[0] == 200
        call = json.dumps({"name": "submit", "input": {"answer": answer}}).encode()
        assert b'"reward":1.0' in (await request("POST", "/gsm8k/call", call, h))[1]
        assert (await request("POST", "/delete", b"", h))[0] == 200

    async def run() -> float:
        for _ in range(50):  # warm up: caches, lazy imports
            await episode()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(episodes):
            await episode()
        profile.disable()
        return pstats.Stats(profile).total_calls / episodes  # type: ignore[attr-defined,no-any-return]

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="another checkout")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(_measure(args.episodes))
        return
    rows = []
    for checkout in [ROOT, *(b.resolve() for b in args.baseline)]:
        env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
        argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--episodes", str(args.episodes)]
        done = subprocess.run(argv, cwd=checkout, env=env, check=True, capture_output=True, text=True)
        rows.append((checkout, float(done.stdout.strip().splitlines()[-1])))
    first = rows[0][1]
    print(f"{args.episodes} GSM8K episodes through the lean door, Python calls per episode:")
    for checkout, per in rows:
        print(f"  {per:8.1f}  {per / first:6.3f}x  {checkout}")


if __name__ == "__main__":
    main()
