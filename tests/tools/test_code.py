"""The ``python`` and ``bash`` tools: code run in each real sandbox backend during an episode
(bubblewrap, Docker, Podman: tests/sandboxes.py), every test on each."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuilder.environment import Environment
from envbuilder.episode import Episode
from envbuilder.protocol import RunToolSuccess
from envbuilder.server._sessions import SessionRecord
from envbuilder.spec import parse_spec
from envbuilder.tools._code import WORKDIRS_ENV
from tests.sandboxes import BACKENDS, configured

HERE = Path(__file__).parent
SPEC = """
name: code-tools
dataset: {type: jsonl, files: {test: data/qa.jsonl}}
splits: {test: {type: test}}
prompt: {template: "{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
tools:
  - type: python
    persist: true
    limits: {wall_seconds: 5, cpu_seconds: 5, output_kb: 4, disk_mb: 1}
  - type: python
    name: scratch
  - type: bash
"""


@pytest.fixture
def workdirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # Not under pytest's tmp_path: as root the sandbox runs as nobody, who must reach the folder.
    root = Path(tempfile.mkdtemp(prefix="envbuilder-test-workdirs-"))
    root.chmod(0o711)
    monkeypatch.setenv(WORKDIRS_ENV, str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    with configured(request.param):  # the tools take the configured backend when loaded
        yield request.param


@pytest.fixture
def env(workdirs: Path, backend: str) -> Environment:
    return Environment(parse_spec(SPEC, file="code.yaml", base_dir=HERE))


async def _call(env: Environment, episode: Episode, tool: str, code: str) -> str:
    result = await env.call_tool(episode, tool, {"code": code})
    assert isinstance(result, RunToolSuccess), result
    return "".join(getattr(b, "text", "") for b in result.output.blocks)


async def test_a_session_keeps_its_folder_until_it_ends(env: Environment, workdirs: Path) -> None:
    episode = Episode(task=env.split("test").task(0))
    assert await _call(env, episode, "python", "open('notes.txt', 'w').write('kept')") == "[no output]"
    assert await _call(env, episode, "python", "print(open('notes.txt').read())") == "kept"
    # The state is the folder's name only: the session stays small, plain JSON.
    name = episode.tool_state["python"]["workdir"]
    data = json.loads(json.dumps(SessionRecord(sid="s", env="code-tools", episode=episode).to_dict()))
    assert data["episode"]["tool_state"]["python"] == {"workdir": name}
    folder = workdirs / name
    assert (folder / "notes.txt").read_text() == "kept"
    # Another session does not see it; a tool without `persist` starts empty each call.
    other = Episode(task=env.split("test").task(0))
    assert "FileNotFoundError" in await _call(env, other, "python", "open('notes.txt')")
    assert "FileNotFoundError" in await _call(env, episode, "scratch", "open('notes.txt')")
    await env.end_session(episode)
    assert not folder.exists()


async def test_limits_and_isolation_are_those_of_the_grader(env: Environment) -> None:
    episode = Episode(task=env.split("test").task(0))
    assert "timeout" in await _call(env, episode, "python", "while True: pass")
    assert "output limit" in await _call(env, episode, "python", "while True: print('x' * 100)")
    assert "Network is unreachable" in await _call(
        env, episode, "python", "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)"
    )
    big = "open(f'f{i}', 'wb').write(b'x' * 600_000) for i in range(3)"
    text = await _call(env, episode, "python", f"[{big}]")
    assert "No space left on device" in text  # the quota holds while the code runs


async def test_a_kept_folder_never_grows_past_its_quota_on_the_host(env: Environment, workdirs: Path) -> None:
    """``disk_mb: 1``: the code writes 64 MB in small files and tries the host folder itself;
    the folder on the host holds at most 1 MB at any time, and what fit is kept."""
    episode = Episode(task=env.split("test").task(0))
    assert await _call(env, episode, "python", "open('keep.txt', 'w').write('kept')") == "[no output]"
    folder = workdirs / episode.tool_state["python"]["workdir"]
    sizes: list[int] = []
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            sizes.append(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()))
            await asyncio.sleep(0.02)

    watcher = asyncio.ensure_future(watch())
    code = (
        "import os\n"
        "for where in ('/persist/escape', '/work/../persist/escape'):\n"
        "    try:\n"
        "        open(where, 'w').write('x')\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
        "written = 0\n"
        "try:\n"
        "    for i in range(1024):\n"
        "        with open(f'part{i}', 'wb') as f:\n"
        "            f.write(b'x' * 65536)\n"
        "        written += 65536\n"
        "except OSError as e:\n"
        "    print('stopped', e.strerror)\n"
        "print(written < 2 * 1024 * 1024)\n"
    )
    text = await _call(env, episode, "python", code)
    stop.set()
    await watcher
    assert "stopped No space left on device" in text and text.rstrip().endswith("True"), text
    assert max(sizes) <= 1024 * 1024
    assert not (folder / "escape").exists()
    assert (folder / "keep.txt").read_text() == "kept"  # what fit is kept
    assert sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) <= 1024 * 1024


async def test_bash_runs_a_script(env: Environment) -> None:
    episode = Episode(task=env.split("test").task(0))
    text = await _call(env, episode, "bash", "echo $HOME; cd /tmp && echo hi > x && cat x; exit 3")
    assert text.startswith("/work\nhi\n") and "exit status 3" in text


async def test_a_sandbox_that_cannot_run_is_an_error_output(
    backend: str, workdirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap cannot mount a folder its user cannot reach; a container engine is gone."""
    hidden = Path(tempfile.mkdtemp(prefix="envbuilder-test-hidden-"))
    try:
        if backend == "bubblewrap":
            hidden.chmod(0o700)
            monkeypatch.setenv(WORKDIRS_ENV, str(hidden / "workdirs"))
            expected = "bubblewrap failed"
        else:
            monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
            expected = "the container engine at tcp://127.0.0.1:1 cannot be reached"
        env = Environment(parse_spec(SPEC, file="code.yaml", base_dir=HERE))
        result = await env.call_tool(Episode(task=env.split("test").task(0)), "python", {"code": "print(1)"})
        assert isinstance(result, RunToolSuccess)
        assert result.output.metadata and expected in result.output.metadata["error"]
        assert "failed: the sandbox could not run the code" in result.output.metadata["error"]
    finally:
        shutil.rmtree(hidden, ignore_errors=True)
