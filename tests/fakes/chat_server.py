"""A scripted model endpoint on a real loopback socket, for tests (chat completions by default;
``route="/messages"`` or ``"/responses"`` for the Anthropic and Responses APIs, see model_apis.py).

``ChatServer(handler)`` calls ``handler(request_json, call_index)`` for every
``POST .../chat/completions`` and answers its ``(status, json body, headers)``::

    with ChatServer(lambda req, i: (200, reply("hi"), {})) as server:
        httpx.post(server.base_url + "/chat/completions", json={...})
        server.requests      # the JSON bodies received, in order
        server.headers_seen  # their headers (lower-case names)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[dict[str, Any], int], tuple[int, dict[str, Any], dict[str, str]]]

__all__ = ["ChatServer", "Handler", "HungServer", "completion", "reply", "tool_call_reply"]


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops bursts of connections: the kernel then retries
    # each dropped SYN after a second, which looks exactly like a serialising client.
    request_queue_size = 256
    daemon_threads = True


class ChatServer:
    def __init__(self, handler: Handler, route: str = "/chat/completions"):
        self.handler = handler
        self.route = route
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def __enter__(self) -> ChatServer:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not self.path.rstrip("/").endswith(outer.route):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "body is not JSON"}}, {})
                    return
                with outer._lock:
                    index = len(outer.requests)
                    outer.requests.append(body)
                    outer.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    status, payload, headers = outer.handler(body, index)
                except Exception as exc:  # a bug in a test's handler shows up as a 500
                    status, payload, headers = 500, {"error": {"message": repr(exc)}}, {}
                self._send(status, payload, headers)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = _Server(("127.0.0.1", 0), _Handler)
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def reply(
    content: str | None, tool_calls: list[dict[str, Any]] | None = None, usage: tuple[int, int] = (10, 5)
) -> dict[str, Any]:
    """A chat-completions answer with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,  # required by the openai SDK's ChatCompletion model, as are `model` and `id`
        "model": "scripted",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def completion(content: str) -> dict[str, Any]:
    """A plain assistant answer (what a judge replies)."""
    return reply(content, usage=(1, 1))


def tool_call_reply(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    """An answer that calls tool ``name`` with the raw JSON string ``arguments``."""
    return reply(
        None, [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]
    )


class HungServer:
    """An endpoint that accepts connections and reads requests but never answers (a hung model
    server): ``connections`` counts the connections opened, one per try of a timed-out request."""

    def __init__(self) -> None:
        import socket

        self._socket = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        self._socket.settimeout(0.05)
        self.connections = 0
        self._held: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:  # a look at the stop flag now and then
                continue
            self.connections += 1
            self._held.append(conn)  # kept open, never answered

    def __enter__(self) -> HungServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._socket.close()
        for conn in self._held:
            conn.close()
