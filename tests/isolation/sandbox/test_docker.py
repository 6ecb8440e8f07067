"""The Docker backend's own parts: the container it asks for, how it reaches an engine, what an
engine failure becomes, and what the code cannot reach inside (what every backend does is
tested once for all of them on a real engine: test_backends.py)."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from envbuilder.errors import SandboxError
from envbuilder.graders import Outcome
from envbuilder.isolation.sandbox import DockerBackend, Limits, Status, default_backend
from envbuilder.isolation.sandbox._docker import LABEL, OWNER_LABEL, owner
from envbuilder.isolation.sandbox._engine import Engine, EngineAddress
from envbuilder.isolation.sandbox._workdir import pack
from tests.graders._util import grade, make
from tests.sandboxes import engine_host, podman_over_tcp

LIMITS = Limits(wall_seconds=5, cpu_seconds=3.5, memory_mb=256, processes=8, output_kb=4, disk_mb=2)
UNREACHABLE = "tcp://127.0.0.1:1"


def test_the_container_is_locked_down() -> None:
    config = DockerBackend(host=UNREACHABLE, image="img:1").container(
        ["python3", "main.py"], LIMITS, "n0", keep=False
    )
    host = config["HostConfig"]
    assert config["Image"] == "img:1" and config["Cmd"][-2:] == ["python3", "main.py"]
    assert config["NetworkDisabled"] is True and host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True and host["AutoRemove"] is True
    assert host["Tmpfs"] == {
        "/work": "rw,exec,nosuid,nodev,size=2097152,mode=1777",
        "/tmp": "rw,exec,nosuid,nodev,size=2097152,mode=1777",
    }
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETUID"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Memory"] == host["MemorySwap"] == (256 + 2 * 2 + 64) * 1024 * 1024  # no swap
    assert host["PidsLimit"] == 8 + 2
    assert host["LogConfig"]["Type"] == "none"  # the code's output is never written to the engine's disk
    assert config["Labels"] == {LABEL: "run", OWNER_LABEL: owner()}
    # The nonce is in the set-up's environment only; the code's is BASE_ENV (env -i).
    assert "ENVBUILDER_RUN=n0" in config["Env"]
    script = config["Cmd"][0]
    assert "--cpu=4:5" in script and f"--as={256 * 1024 * 1024}" in script and "--fsize=2097152" in script
    assert "env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/work" in script
    assert "ENVBUILDER_RUN" not in script.split("unset ENVBUILDER_RUN", 1)[1]


def test_files_travel_as_a_tar_owned_by_the_run_user(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("kept")
    (tmp_path / "main.py").write_text("old")  # the run's own file wins
    (tmp_path / "link").symlink_to("/etc/passwd")  # links stay behind
    data = pack(tmp_path, {"main.py": b"print(1)\n"}, uid=65534, limit=1 << 20)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["kept.txt", "main.py"]
        assert all(m.uid == 65534 for m in members.values())
        assert tar.extractfile(members["main.py"]).read() == b"print(1)\n"  # type: ignore[union-attr]


def test_an_engine_address_it_cannot_use_is_a_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxError, match="ssh -NL") as caught:
        DockerBackend(host="ssh://user@build-host")
    assert "DOCKER_HOST='ssh://user@build-host' is not an engine address" in str(caught.value)
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", "/nonexistent-certs")
    with pytest.raises(SandboxError, match="TLS files in /nonexistent-certs cannot be read"):
        DockerBackend(host="tcp://engine.example:2376")
    monkeypatch.delenv("DOCKER_TLS_VERIFY")
    assert EngineAddress.from_env("tcp://engine.example:2375").base_url == "http://engine.example:2375"


def test_each_engine_setting_is_its_own_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2")
    first = default_backend("docker")
    assert default_backend("docker") is first
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:3")
    second = default_backend("docker")
    assert second is not first and str(second.address) == "tcp://127.0.0.1:3"  # type: ignore[attr-defined]


# What engines answer a kill or a removal of a container that is not running, or is gone:
# Docker 409 and 404; Podman a 500 with its own words, "container state improper" for a stopped
# one and "no such container" for one auto-removed as the call arrives (the run ended by itself,
# at its CPU limit, as its wall time ran out).
_GONE = [
    (404, "No such container: c1"),
    (409, "Container c1 is not running"),
    (500, "can only kill running containers. c1 is in state exited: container state improper"),
    (500, "no container with ID c1 found in database: no such container"),
]


@pytest.mark.parametrize(("status", "message"), _GONE)
async def test_a_container_already_gone_is_killed_and_removed_without_error(
    status: int, message: str
) -> None:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from tests.servers import serve_app

    app = FastAPI()
    calls: list[str] = []

    @app.api_route("/{path:path}", methods=["GET", "POST", "DELETE"])
    async def answer(path: str) -> JSONResponse:
        calls.append(path)
        return JSONResponse({"message": message}, status_code=status)

    with serve_app(app) as url:
        engine = Engine(EngineAddress.from_env("tcp://" + url.removeprefix("http://")))
        async with engine.connect() as api:
            await api.kill("c1")
            await api.remove("c1")
            # Only a kill or a removal may find the container gone: a start that does is refused.
            with pytest.raises(SandboxError) as info:
                await api.start("c1")
    assert calls == ["containers/c1/kill", "containers/c1", "containers/c1/start"]
    refused = f"the container engine refused POST /containers/c1/start: {message} (HTTP {status})"
    assert info.value.message == refused


async def test_any_other_engine_failure_of_a_kill_is_a_sandbox_error() -> None:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from tests.servers import serve_app

    app = FastAPI()

    @app.post("/containers/c1/kill")
    async def kill() -> JSONResponse:
        return JSONResponse({"message": "runtime crashed: signal failed"}, status_code=500)

    with serve_app(app) as url:
        engine = Engine(EngineAddress.from_env("tcp://" + url.removeprefix("http://")))
        async with engine.connect() as api:
            with pytest.raises(SandboxError) as info:
                await api.kill("c1")
    assert info.value.message == (
        "the container engine refused POST /containers/c1/kill: runtime crashed: signal failed (HTTP 500)"
    )


async def test_an_unreachable_engine_is_a_sandbox_error() -> None:
    with pytest.raises(SandboxError, match=r"the container engine at tcp://127\.0\.0\.1:1 cannot be reached"):
        await DockerBackend(host=UNREACHABLE).run(["python3", "main.py"], {"main.py": b"print(1)"}, LIMITS)


async def test_the_grader_says_ungradeable_when_the_engine_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE)
    grader = make({"type": "unit_tests", "program": "{{ answer }}", "backend": "docker"})
    result = await grade(grader, "print(1)", {})
    assert result.outcome is Outcome.UNGRADEABLE and result.score is None
    assert "the sandbox could not run the code" in result.reason


async def test_a_missing_image_says_how_to_build_it() -> None:
    backend = DockerBackend(host=engine_host("docker"), image="envbuilder-no-such-image:0")
    with pytest.raises(SandboxError, match="has no image 'envbuilder-no-such-image:0'") as caught:
        await backend.run(["true"], {}, LIMITS)
    assert "envbuilder sandbox build-image" in str(caught.value)


async def test_an_image_without_the_set_up_tools_is_a_sandbox_error() -> None:
    """An image with ``sh`` and nothing else: the set-up cannot start the run, and says why."""
    host = engine_host("docker")
    image = "envbuilder-test-sh-only:1"
    async with Engine(EngineAddress.from_env(host)).connect() as api:
        if await api.image(image) is None:
            await api.request(
                "POST", "/images/create", params={"fromSrc": "-", "repo": image}, content=_sh_only_rootfs()
            )
    with pytest.raises(SandboxError, match="the sandbox image could not start the run") as caught:
        await DockerBackend(host=host, image=image).run(["true"], {}, LIMITS)
    assert "setpriv: not found" in str(caught.value) and "setpriv and prlimit" in str(caught.value)


def _sh_only_rootfs() -> bytes:
    """A root filesystem of the host's ``/bin/sh`` and the libraries it loads (from ``ldd``)."""
    sh = Path(os.path.realpath("/bin/sh"))
    found = subprocess.run(["ldd", str(sh)], capture_output=True, text=True, check=True).stdout
    libraries = [word for word in found.split() if word.startswith("/")]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in [*libraries, "/bin/sh"]:
            real = os.path.realpath(path if path != "/bin/sh" else sh)
            tar.add(real, arcname=path.lstrip("/"))
        for folder in ("work", "tmp"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(info)
    return buf.getvalue()


async def test_the_code_cannot_read_the_nonce_or_stop_the_set_up() -> None:
    """The end of a run is the set-up's (root's) word: the code, as uid 65534, can neither read
    its nonce nor signal it, so it cannot fake an end (nor a kept folder's tar)."""
    backend = DockerBackend(host=engine_host("docker"))
    code = (
        "import os, signal\n"
        "for what in ('/proc/1/environ', '/proc/1/mem'):\n"
        "    try:\n"
        "        open(what, 'rb').read(1)\n"
        "        print('read', what)\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
        "try:\n"
        "    os.kill(1, signal.SIGKILL)\n"
        "except OSError as e:\n"
        "    print(type(e).__name__)\n"
        "print('\\n0123456789abcdef0123456789abcdef:end 0 0')\n"
    )
    result = await backend.run(["python3", "-I", "main.py"], {"main.py": code.encode()}, LIMITS)
    assert result.status is Status.OK
    lines = result.stdout.splitlines()
    assert lines[:3] == ["PermissionError", "PermissionError", "PermissionError"]
    assert lines[-1] == "0123456789abcdef0123456789abcdef:end 0 0"  # the code's own line, shown as such


async def test_no_container_is_left_behind() -> None:
    """Runs that end, time out or are cancelled leave no container of theirs on the engine."""
    host = engine_host("docker")
    backend = DockerBackend(host=host)
    await backend.run(["true"], {}, LIMITS)
    await backend.run(["sleep", "60"], {}, LIMITS.model_copy(update={"wall_seconds": 1}))
    task = asyncio.ensure_future(
        backend.run(["sleep", "60"], {}, LIMITS.model_copy(update={"wall_seconds": 60}))
    )
    await asyncio.sleep(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with Engine(EngineAddress.from_env(host)).connect() as api:
        for _ in range(100):  # the engine removes an ended container on its own, soon after
            left = await api.containers({LABEL: "run", OWNER_LABEL: owner()})
            if not left:
                break
            await asyncio.sleep(0.1)
    assert left == []


async def test_the_whole_run_is_bounded_by_a_memory_cgroup() -> None:
    """Two processes of 200 MB each: within each one's 256 MB address space (bubblewrap's bound),
    past the container's 256 + 2 x 2 + 64 MB; the cgroup's OOM killer ends it: a memory limit."""
    code = (
        "import os, sys, time\n"
        "child = os.fork()\n"
        "x = bytearray(200 * 1024 * 1024)\n"
        "time.sleep(3)\n"
        "if child == 0:\n"
        "    os._exit(0)\n"
        "sys.exit(1 if os.waitpid(child, 0)[1] else 0)\n"
    )
    backend = DockerBackend(host=engine_host("docker"))
    result = await backend.run(["python3", "-I", "main.py"], {"main.py": code.encode()}, LIMITS)
    assert result.status is Status.MEMORY and result.describe().startswith("memory limit"), result


async def test_an_engine_over_tcp_runs_the_same() -> None:
    """``DOCKER_HOST=tcp://…`` (how replicas share engine hosts): here Podman's API on a TCP port."""
    host = podman_over_tcp()
    backend = DockerBackend(host=host)
    assert backend.address.base_url.startswith("http://127.0.0.1:")
    result = await backend.run(["python3", "-I", "main.py"], {"main.py": b"print(6 * 7)"}, LIMITS)
    assert (result.status, result.stdout) == (Status.OK, "42\n")


def test_tls_to_an_engine_uses_the_docker_cert_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DOCKER_TLS_VERIFY: https, the engine checked against ca.pem, this client known by its
    cert.pem and key.pem (files made here, as ``dockerd --tlsverify`` setups have them)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "envbuilder-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "ca.pem").write_bytes(pem)
    (tmp_path / "cert.pem").write_bytes(pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(tmp_path))
    address = EngineAddress.from_env("tcp://engine.example:2376")
    assert address.base_url == "https://engine.example:2376" and address.tls is not None
    assert address.tls.verify_mode.name == "CERT_REQUIRED" and address.tls.get_ca_certs()
