"""A scripted OpenAI-compatible chat-completions server on a real loopback socket, for tests.

``ChatServer(handler)`` answers ``POST /v1/chat/completions`` with whatever
``handler(request_json, call_index) -> (status, json_body, headers)`` returns; the handler
may sleep to be slow. It runs in a thread (stdlib ``ThreadingHTTPServer``) on a free port.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Handler = Callable[[dict[str, Any], int], tuple[int, dict[str, Any], dict[str, str]]]


def completion(content: str, model: str = "judge") -> dict[str, Any]:
    """A chat-completions response body whose assistant message is ``content``."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops bursts of connections: the kernel then retries
    # each dropped SYN after a second, which looks exactly like a serialising client.
    request_queue_size = 256


class ChatServer:
    """Context manager: ``with ChatServer(handler) as server: server.base_url``."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def _request_handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                with outer._lock:
                    index = len(outer.requests)
                    outer.requests.append(body)
                    outer.headers_seen.append(dict(self.headers.items()))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    status, payload, headers = 404, {"error": {"message": "not found"}}, {}
                else:
                    status, payload, headers = outer.handler(body, index)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        return _Handler

    def __enter__(self) -> ChatServer:
        server = _Server(("127.0.0.1", 0), self._request_handler())
        server.daemon_threads = True
        self._server = server
        self.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
