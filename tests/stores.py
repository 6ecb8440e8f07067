"""Real stores for the publishing tests: moto's S3 server and a static HTTP server, on free ports."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.servers import free_port

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def moto_s3(bucket: str = "envs") -> Iterator[dict[str, str]]:
    """moto's S3 server on a free port with ``bucket`` made; yields the variables that point
    boto/s3fs at it (set them in ``os.environ`` or a subprocess's environment)."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    try:
        httpx.put(f"{env['AWS_ENDPOINT_URL']}/{bucket}").raise_for_status()
        yield env
    finally:
        server.stop()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def static_http(folder: Path) -> Iterator[str]:
    """A static HTTP server over ``folder`` (no ETag, as a plain web server); yields its URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def envbuilder_serve(args: list[str], env: dict[str, str]) -> Iterator[str]:
    """``envbuilder serve ARGS`` in another process on a free port; yields its URL once healthy."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envbuilder", "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"envbuilder serve exited {proc.returncode}:\n{proc.stdout.read()}")  # type: ignore[union-attr]
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("envbuilder serve never became healthy")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
