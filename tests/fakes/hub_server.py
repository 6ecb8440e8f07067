"""A small stand-in for the HuggingFace Hub's HTTP API that records every request.

It answers the calls ``huggingface_hub`` makes to publish a dataset repository and read it back
(create the repo, list its tree, pre-upload, commit with inline base64 files, resolve a file),
keeps the files in memory, and tells the client to upload every file inline ("regular"), so LFS
and Xet uploads are not exercised here.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class HubState:
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """Repository id → path → bytes."""
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(method, path) of every request, in order."""
    commits: list[list[str]] = field(default_factory=list)
    """The paths each commit added."""


_TREE = re.compile(r"^/api/datasets/([^/]+/[^/]+)/tree/([^/?]+)")
_PRE = re.compile(r"^/api/datasets/([^/]+/[^/]+)/preupload/([^/?]+)")
_COMMIT = re.compile(r"^/api/datasets/([^/]+/[^/]+)/commit/([^/?]+)")
_INFO = re.compile(r"^/api/datasets/([^/]+/[^/?]+)(?:/revision/[^/?]+)?/?(?:\?.*)?$")
_PATHS = re.compile(r"^/api/datasets/([^/]+/[^/]+)/paths-info/([^/?]+)")
_RESOLVE = re.compile(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/([^?]+)")


def _handler(state: HubState) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, value: Any, status: int = 200) -> None:
            self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            state.requests.append((self.command, self.path))
            if m := _TREE.match(self.path):
                files = state.files.get(m[1])
                if files is None:
                    return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
                return self._json(_tree(files, self.path))
            if m := _INFO.match(self.path):
                if m[1] not in state.files:
                    return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
                siblings = [{"rfilename": p} for p in state.files[m[1]]]
                return self._json({"id": m[1], "sha": "1" * 40, "siblings": siblings, "private": False})
            if m := _RESOLVE.match(self.path):
                data = state.files.get(m[1], {}).get(m[3])
                if data is None:
                    return self._send(
                        404, b"{}", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": "0" * 40}
                    )
                return self._send(200, data, {"ETag": f'"{_oid(data)}"', "X-Repo-Commit": "0" * 40})
            self._send(404, b"{}")

        def do_POST(self) -> None:
            state.requests.append((self.command, self.path))
            body = self._body()
            if self.path.startswith("/api/repos/create"):
                repo = json.loads(body)
                repo_id = f"{repo['organization']}/{repo['name']}"
                state.files.setdefault(repo_id, {})
                return self._json({"url": f"http://{self.headers['Host']}/datasets/{repo_id}"})
            if m := _PATHS.match(self.path):
                form = parse_qs(body.decode())
                wanted = form.get("paths", [])
                files = state.files.get(m[1], {})
                return self._json(
                    [
                        {"type": "file", "path": p, "size": len(files[p]), "oid": _oid(files[p])}
                        for p in wanted
                        if p in files
                    ]
                )
            if m := _PRE.match(self.path):
                files = json.loads(body)["files"]
                return self._json(
                    {
                        "files": [
                            {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files
                        ]
                    }
                )
            if m := _COMMIT.match(self.path):
                added = []
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        value = item["value"]
                        state.files.setdefault(m[1], {})[value["path"]] = base64.b64decode(value["content"])
                        added.append(value["path"])
                state.commits.append(added)
                host = self.headers["Host"]
                return self._json(
                    {
                        "commitUrl": f"http://{host}/datasets/{m[1]}/commit/{'1' * 40}",
                        "commitOid": "1" * 40,
                        "pullRequestUrl": None,
                    }
                )
            self._send(404, b"{}")

    return Handler


def _tree(files: dict[str, bytes], url: str) -> list[dict[str, Any]]:
    """The tree listing of ``url`` (``.../tree/REV[/FOLDER]?recursive=...``)."""
    parts = urlsplit(url)
    folder = unquote(parts.path.split("/tree/", 1)[1]).partition("/")[2].strip("/")
    recursive = parse_qs(parts.query).get("recursive") == ["true"]
    prefix = f"{folder}/" if folder else ""
    out: dict[str, dict[str, Any]] = {}
    for path, data in files.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        if recursive or "/" not in rest:
            out[path] = {"type": "file", "path": path, "size": len(data), "oid": _oid(data)}
        else:
            sub = prefix + rest.split("/", 1)[0]
            out[sub] = {"type": "directory", "path": sub, "oid": "0" * 40}
    return list(out.values())


def _oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@contextlib.contextmanager
def hub_server() -> Iterator[tuple[str, HubState]]:
    """The fake Hub on a free port; yields its URL (use as ``HF_ENDPOINT``) and its state."""
    state = HubState()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
