"""A client of the Docker Engine HTTP API (which Podman serves too), over httpx.

The engine is where ``DOCKER_HOST`` says, as the ``docker`` CLI reads it: ``unix:///path`` (the
default is ``unix:///var/run/docker.sock``; Podman's is ``unix:///run/podman/podman.sock``) or
``tcp://host:port``, with TLS when ``DOCKER_TLS_VERIFY`` is set (``ca.pem``, ``cert.pem`` and
``key.pem`` from ``DOCKER_CERT_PATH``, default ``~/.docker``). No CLI is needed, and one run
costs a few requests on a local socket instead of a CLI process (a Go binary) per step.

Why the API rather than the CLI: a container that lives for a session (many exec calls, files
read and written) is a handful of requests here, while the CLI would start a process for each;
and the API says what failed (a status and the engine's message) where the CLI exits 125.

Paths are unversioned (the engine's own API version), so the same requests work on Docker 20.10
to 28 and on Podman's compatible API. Streams of a container (attach, exec) are *hijacked*: the
engine answers ``101 UPGRADED`` and the connection becomes raw bytes, stdout and stderr in frames
of an 8-byte header (stream, 0, 0, 0, big-endian length) and the payload; what the client
writes is the container's stdin. httpx hands that connection over as the response's
``network_stream``.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import struct
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from envbuilder.errors import SandboxError

if TYPE_CHECKING:
    import httpx

HOST_ENV = "DOCKER_HOST"
DEFAULT_HOST = "unix:///var/run/docker.sock"
_TLS_ENV = ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")
#: The variables that say where the engine is (a backend built with other values is another one).
ENGINE_ENV = (HOST_ENV, *_TLS_ENV)
_HINT = "Start the engine (dockerd, or `podman system service`), or point DOCKER_HOST at one"
#: Podman's words in a 500 for a container that is not running (Docker: 409) or is being removed
#: as the call arrives (an auto-removed container that ended by itself; Docker: 404).
_PODMAN_GONE = ("container state improper", "no such container")
_CONNECT_SECONDS = 10.0
_REQUEST_SECONDS = 120.0
STDOUT, STDERR = 1, 2


@dataclass(frozen=True)
class EngineAddress:
    """Where the engine listens, and how to speak to it (``str()`` is the address as given)."""

    url: str
    uds: str | None = None
    base_url: str = "http://docker"
    tls: ssl.SSLContext | None = None

    def __str__(self) -> str:
        return self.url

    @classmethod
    def from_env(cls, host: str | None = None) -> EngineAddress:
        """The engine at ``host`` (default ``$DOCKER_HOST``, else the local Docker socket).

        Raises:
            SandboxError: the address is not one this client speaks (``ssh://``, a bad URL).
        """
        url = host or os.environ.get(HOST_ENV) or DEFAULT_HOST
        parts = urlsplit(url)
        if parts.scheme == "unix" and parts.path:
            return cls(url=url, uds=parts.path)
        if parts.scheme == "tcp" and parts.hostname and parts.port:
            tls = _tls_context() if os.environ.get("DOCKER_TLS_VERIFY") else None
            scheme = "https" if tls else "http"
            return cls(url=url, base_url=f"{scheme}://{parts.hostname}:{parts.port}", tls=tls)
        hint = (
            "An ssh:// engine is reached through a forwarded socket: ssh -NL /tmp/docker.sock:"
            "/var/run/docker.sock user@host, then DOCKER_HOST=unix:///tmp/docker.sock"
            if parts.scheme == "ssh"
            else "Use unix:///path/to/docker.sock or tcp://host:port"
        )
        raise SandboxError(f"{HOST_ENV}={url!r} is not an engine address envbuilder can use", hint=hint)


def _tls_context() -> ssl.SSLContext:
    """TLS as the docker CLI does it with DOCKER_TLS_VERIFY: the engine checked against ca.pem,
    and this client known by cert.pem and key.pem (all in DOCKER_CERT_PATH, default ~/.docker)."""
    folder = Path(os.environ.get("DOCKER_CERT_PATH") or Path.home() / ".docker")
    try:
        context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
        context.load_cert_chain(str(folder / "cert.pem"), str(folder / "key.pem"))
    except (OSError, ssl.SSLError) as exc:
        raise SandboxError(
            f"the engine's TLS files in {folder} cannot be read: {exc}",
            hint="DOCKER_CERT_PATH must hold ca.pem, cert.pem and key.pem",
        ) from None
    return context


class Engine:
    """One engine; :meth:`connect` opens a client on the running event loop."""

    def __init__(self, address: EngineAddress):
        self.address = address

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[EngineClient]:
        """A client for a few requests (its connections close with the block)."""
        import httpx  # here: a server that never runs a container never imports it

        address = self.address
        transport = httpx.AsyncHTTPTransport(uds=address.uds, verify=address.tls or False)
        timeout = httpx.Timeout(_REQUEST_SECONDS, connect=_CONNECT_SECONDS)
        async with httpx.AsyncClient(
            transport=transport, base_url=address.base_url, timeout=timeout
        ) as client:
            yield EngineClient(client, address)


class EngineClient:
    """The engine's API calls envbuilder makes; each failure is a :class:`SandboxError`."""

    def __init__(self, client: httpx.AsyncClient, address: EngineAddress):
        self._client = client
        self.address = address

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        content: bytes | AsyncIterator[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        missing_ok: bool = False,
        timeout: float | None = _REQUEST_SECONDS,
    ) -> httpx.Response | None:
        """One call; its response (None when ``missing_ok`` and the container is gone or not running:
        404, 409, or a Podman 500 that says so).

        Raises:
            SandboxError: the engine cannot be reached, or refused the call.
        """
        import httpx

        try:
            response = await self._client.request(
                method,
                path,
                params=params,
                json=body,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(timeout, connect=_CONNECT_SECONDS),
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if missing_ok and (
            response.status_code in (404, 409)
            or (response.status_code == 500 and any(m in _message(response) for m in _PODMAN_GONE))
        ):
            return None
        if response.status_code >= 400:
            raise SandboxError(
                f"the container engine refused {method} {path.split('?')[0]}: "
                f"{_message(response)} (HTTP {response.status_code})",
                hint=_HINT if response.status_code >= 500 else None,
            )
        return response

    def _unreachable(self, exc: Exception) -> SandboxError:
        return SandboxError(
            f"the container engine at {self.address} cannot be reached: {exc or type(exc).__name__}",
            hint=_HINT,
        )

    async def version(self) -> dict[str, Any]:
        """The engine's name and versions (``GET /version``)."""
        response = await self.request("GET", "/version")
        assert response is not None
        return dict(response.json())

    async def image(self, name: str) -> dict[str, Any] | None:
        """The image called ``name``, or None when the engine does not have it."""
        response = await self.request("GET", f"/images/{quote(name, safe=':/')}/json", missing_ok=True)
        return None if response is None else dict(response.json())

    async def create(self, config: Mapping[str, Any], *, name: str | None = None) -> str:
        """Create a container; its id."""
        params = {"name": name} if name else None
        try:
            response = await self.request("POST", "/containers/create", params=params, body=config)
        except SandboxError as exc:
            if "No such image" in str(exc) or "image not known" in str(exc):
                raise SandboxError(
                    f"the container engine at {self.address} has no image {config.get('Image')!r}",
                    hint="Build it with `envbuilder sandbox build-image`, or name another with "
                    "ENVBUILDER_SANDBOX_IMAGE",
                ) from None
            raise
        assert response is not None
        return str(response.json()["Id"])

    async def start(self, container: str) -> None:
        await self.request("POST", f"/containers/{container}/start")

    async def kill(self, container: str) -> None:
        """SIGKILL the container (gone or already stopped is fine)."""
        await self.request("POST", f"/containers/{container}/kill", missing_ok=True)

    async def remove(self, container: str) -> None:
        """Remove the container, killing it first if it runs (gone is fine)."""
        await self.request("DELETE", f"/containers/{container}", params={"force": 1}, missing_ok=True)

    async def containers(
        self, labels: Mapping[str, str], *, status: str | None = None
    ) -> list[dict[str, Any]]:
        """The containers (running or not) that carry all these labels."""
        filters: dict[str, list[str]] = {"label": [f"{k}={v}" for k, v in labels.items()]}
        if status:
            filters["status"] = [status]
        response = await self.request(
            "GET", "/containers/json", params={"all": 1, "filters": json.dumps(filters)}
        )
        assert response is not None
        return list(response.json())

    @contextlib.asynccontextmanager
    async def attach(self, container: str) -> AsyncIterator[RawStream]:
        """The container's stdin, stdout and stderr (attach before start: nothing is missed)."""
        params = {"stream": 1, "stdin": 1, "stdout": 1, "stderr": 1}
        async with self.hijack(f"/containers/{container}/attach", params) as stream:
            yield stream

    @contextlib.asynccontextmanager
    async def hijack(
        self, path: str, params: Mapping[str, Any], body: Any = None
    ) -> AsyncIterator[RawStream]:
        """A POST whose connection the engine turns into a raw stream (attach, exec start)."""
        import httpx

        headers = {"Connection": "Upgrade", "Upgrade": "tcp"}
        request = self._client.build_request(
            "POST",
            path,
            params=params,
            json=body,
            headers=headers,
            timeout=httpx.Timeout(None, connect=_CONNECT_SECONDS),
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        try:
            if response.status_code != 101:
                await response.aread()
                raise SandboxError(
                    f"the container engine refused to attach to the container: {_message(response)} "
                    f"(HTTP {response.status_code})"
                )
            yield RawStream(response.extensions["network_stream"])
        finally:
            await response.aclose()


class RawStream:
    """A hijacked connection: write the container's stdin, read its output frames."""

    def __init__(self, stream: Any):
        import httpcore

        self._stream = stream
        self._buffer = bytearray()
        # What a broken or closed connection raises (the container ended, or the engine went).
        self._broken = (OSError, httpcore.NetworkError, httpcore.TimeoutException)

    async def write(self, data: bytes) -> bool:
        """Send ``data``; False when the container no longer reads (it ended)."""
        try:
            if data:
                await self._stream.write(data)
        except self._broken:
            return False
        return True

    async def frames(self) -> AsyncIterator[tuple[int, bytes]]:
        """``(stream, payload)`` until the engine closes the connection (the container ended)."""
        buffer = self._buffer
        while True:
            while len(buffer) >= 8:
                kind = buffer[0]
                (size,) = struct.unpack(">I", buffer[4:8])
                if len(buffer) < 8 + size:
                    break
                payload = bytes(buffer[8 : 8 + size])
                del buffer[: 8 + size]
                yield kind, payload
            try:
                chunk = await self._stream.read(1 << 16)
            except self._broken:
                chunk = b""
            if not chunk:
                return
            buffer += chunk


def _message(response: httpx.Response) -> str:
    """The engine's own words for a refused call (``{"message": ...}``, or the body)."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])[:300]
    return response.text.strip()[:300]
