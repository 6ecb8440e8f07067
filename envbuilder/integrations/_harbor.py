"""A spec's tasks as Harbor task directories: ``envbuilder export harbor SPEC OUT/``.

Each task becomes ``OUT/<task id>/`` (``<split>-<task id>`` when the spec has several splits)
with ``instruction.md``, ``task.toml``, ``environment/Dockerfile``, ``tests/test.sh`` (writing
``/logs/verifier/reward.txt``) and ``solution/solve.sh``, the layout the ``harbor`` package
reads. What goes in them depends on the spec's grader:

- ``harbor_tests`` (a spec over a ``harbor`` dataset): the task's own parts, as they were read:
  its instruction, task.toml, build context, tests and solution (a round trip);
- ``unit_tests`` (HumanEval's shape): the agent writes its code to ``/app/solution.py``; the tests
  build the grader's program around it (rendered now, the answer's place marked) and run it, as
  an unprivileged user, with the harness's hidden tests when the grader has one; the solution
  writes the spec's gold answer (or the grader's reference) there;
- ``repo_tests`` (SWE-bench's shape, a spec with ``sandbox: repository:``): the image is the
  spec's own build with the repository at its base commit in the working folder (one commit, no
  history); the tests apply the hidden test patch and run FAIL_TO_PASS and PASS_TO_PASS with
  pytest (reward 1 when every one passes); the solution applies the gold patch.

Other graders compare an answer with a target in envbuilder's own code, which a Harbor
container does not have: such specs are refused, naming the grader.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shlex
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuilder.environment import Environment, load_environment
from envbuilder.errors import DataError
from envbuilder.graders._code import extract_code
from envbuilder.graders._repo_tests import RepoTestsGrader, _tests
from envbuilder.graders._unit_tests import UnitTestsGrader
from envbuilder.integrations._export import require_empty_folder
from envbuilder.isolation.sandbox import check_limits, repository_tree
from envbuilder.protocol import TextBlock
from envbuilder.templating import Template

__all__ = ["HarborExport", "export_harbor"]

_MARK = "\u2063ENVBUILDER-ANSWER\u2063"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_GIT_ENV = "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'"
"""Lets git work in a repository another user owns (the tests run as root, the agent may not)."""
_BASE = "python:3.12-slim"
"""The image exported tasks without a sandbox build on (envbuilder's own import reads a FROM
the engine lacks as its local base)."""


@dataclass(frozen=True)
class HarborExport:
    """What :func:`export_harbor` wrote."""

    path: Path
    tasks: list[str]
    """The task directories' names, in order."""
    kind: str
    """The grader the tests come from (``harbor_tests``, ``unit_tests`` or ``repo_tests``)."""


def export_harbor(
    spec: Path,
    out: Path,
    *,
    split: str | None = None,
    limit: int | None = None,
    trust_code: bool | None = None,
) -> HarborExport:
    """Write the tasks of ``spec`` (one split, or all) as Harbor task directories in ``out``.

    Raises:
        SpecError: the spec does not load.
        DataError: ``out`` holds files already (``export_exists``), the split is unknown, or
            the grader cannot be run by a Harbor task's tests (``export_unsupported``).
    """
    require_empty_folder(out)
    env = load_environment(spec, trust_code=trust_code)
    assert env.submit is not None
    grader = env.submit.grader
    kind = grader.config.type
    if kind not in ("harbor_tests", "unit_tests", "repo_tests"):
        raise DataError(
            f"a Harbor task's tests cannot grade answers the way the spec's {kind!r} grader does",
            hint="Harbor tasks are exported from specs graded by harbor_tests, unit_tests or repo_tests",
            code="export_unsupported",
        )
    if kind == "harbor_tests" and (env.spec.sandbox is None or env.spec.sandbox.build is None):
        raise DataError(
            "a harbor_tests spec without `sandbox: build:` cannot be exported", code="export_unsupported"
        )
    splits = [split] if split is not None else list(env.splits)
    for name in splits:
        if name not in env.splits:
            known = ", ".join(env.splits)
            raise DataError(f"the spec has no split {name!r} (it has {known})", code="export_split")
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name in splits:
        view = env.split(name)
        for index in range(min(len(view), limit) if limit is not None else len(view)):
            task = view.task(index)
            ident = _SAFE.sub("-", _task_id(env, task, index)).strip("-.")
            folder = ident if len(splits) == 1 else f"{name}-{ident}"
            target = out / folder
            if target.exists():
                folder = f"{folder}-{index}"
                target = out / folder
            target.mkdir()
            if kind == "harbor_tests":
                _harbor_task(env, task, target)
            elif isinstance(grader, UnitTestsGrader):
                _unit_tests_task(env, grader, task, target, (name, index))
            else:
                assert isinstance(grader, RepoTestsGrader)
                _repo_task(env, grader, task, target, (name, index))
            written.append(folder)
    return HarborExport(out, written, kind)


# -- the parts -------------------------------------------------------------------------------


def _write(path: Path, text: str | bytes, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    if executable:
        path.chmod(0o755)


def _untar(data: bytes, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        tar.extractall(folder, filter="data")


def _prompt_text(env: Environment, task: dict[str, Any]) -> str:
    parts = []
    for message in env.messages(task):
        text = "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        parts.append(text if message.role == "user" else f"({message.role}) {text}")
    return "\n\n".join(parts)


def _task_id(env: Environment, task: dict[str, Any], index: int) -> str:
    """The task's id (the spec's `task: id:` field), else ``<spec name>-<index>``."""
    field = env.spec.task.id
    value = task.get(field) if field else None
    return str(value) if value not in (None, "") else f"{env.name}-{index}"


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _task_toml(
    env: Environment, where: tuple[str, int], task: dict[str, Any], *, verifier_timeout: float
) -> str:
    """task.toml of an exported task: its sandbox's limits (the task's own when the spec has a
    `limits_field`) as `[environment]` cpus/memory_mb/storage_mb and `[agent] timeout_sec`."""
    sandbox = env.spec.sandbox
    task_id = _task_id(env, task, where[1])
    lines = [
        'schema_version = "1.4"',
        "",
        "[metadata]",
        f"envbuilder_spec = {_toml_value(env.name)}",
        f"envbuilder_split = {_toml_value(where[0])}",
        f"envbuilder_index = {where[1]}",
        f"envbuilder_task = {_toml_value(task_id)}",
        "",
        "[verifier]",
        f"timeout_sec = {float(verifier_timeout)}",
        "",
        "[environment]",
        'network_mode = "no-network"',
    ]
    if sandbox is not None:
        try:
            own = check_limits(task.get(sandbox.limits_field)) if sandbox.limits_field else {}
        except ValueError as exc:
            raise DataError(
                f"task {task_id!r}: its `{sandbox.limits_field}` is not limits: {exc}", code="data_unreadable"
            ) from None
        storage = own.get("storage_mb", sandbox.storage_mb)
        lines += [
            f"cpus = {own.get('cpus', sandbox.cpus):g}",
            f"memory_mb = {int(own.get('memory_mb', sandbox.memory_mb))}",
            *([f"storage_mb = {int(storage)}"] if storage is not None else []),
        ]
        agent = own.get("agent_timeout_sec", sandbox.time_limit)
        if agent is not None:
            lines += ["", "[agent]", f"timeout_sec = {float(agent)}"]
    return "\n".join(lines) + "\n"


def _heredoc(path: str, text: str) -> str:
    mark = "ENVBUILDER_EOF"
    while mark in text:
        mark += "_"
    return f"cat > {shlex.quote(path)} <<'{mark}'\n{text}{'' if text.endswith(chr(10)) else chr(10)}{mark}\n"


def _harbor_task(env: Environment, task: dict[str, Any], target: Path) -> None:
    """The task's own parts, as the `harbor` source read them."""
    sandbox = env.spec.sandbox
    assert sandbox is not None and sandbox.build is not None and sandbox.build.context_field is not None
    _write(target / "instruction.md", str(task.get("instruction") or _prompt_text(env, task)))
    _write(target / "task.toml", str(task["config"]))
    shutil.copytree(env.loaded.base_dir / str(task[sandbox.build.context_field]), target / "environment")
    _untar(base64.b64decode(str(task["tests"])), target / "tests")
    _untar(base64.b64decode(str(task["solution"])), target / "solution")


_UNIT_RUNNER = '''"""Runs /app/solution.py as the task's program (envbuilder's unit_tests, exported)."""

import json
import os
import re
import secrets
import subprocess
import sys
import tempfile

spec = json.load(open("/tests/program.json"))
try:
    answer = open("/app/solution.py").read()
except OSError:
    answer = ""
blocks = re.findall(r"```[A-Za-z0-9_+-]*\\n(.*?)```", answer, re.S)
code = blocks[0] if blocks else answer
work = tempfile.mkdtemp()
os.chmod(work, 0o755)
program = spec["head"] + code + spec["tail"]
nonce = secrets.token_hex(16)
if spec.get("tests") is not None:  # the harness: hidden tests call the answer's function
    with open(os.path.join(work, "solution.py"), "w") as f:
        f.write(program)
    # The tests first (they may define the prompt's stub again), then the answer's function
    # under its name and as `candidate`, then the call.
    entry = spec["entry_point"]
    check = (
        "import sys\\nsys.path.insert(0, %r)\\n%s\\nimport solution as _answer\\n"
        "candidate = %s = getattr(_answer, %r)\\n%s\\nprint(%r)\\n"
        % (work, spec["tests"], entry, entry, spec.get("call") or "", nonce)
    )
    with open(os.path.join(work, "check.py"), "w") as f:
        f.write(check)
    run = ["python3", "-I", "check.py"]
else:
    with open(os.path.join(work, "main.py"), "w") as f:
        f.write(program)
    run = ["python3", "-I", "main.py"]
for name in os.listdir(work):
    os.chmod(os.path.join(work, name), 0o644)
try:
    # As another user: the answer's code cannot write the verdict in /logs/verifier (root's).
    done = subprocess.run(run, cwd=work, capture_output=True, text=True, timeout=spec["timeout"],
                          user=65534, group=65534)
    passed = done.returncode == 0 and (spec.get("tests") is None or nonce in done.stdout)
    print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
except subprocess.TimeoutExpired:
    passed = False
with open("/logs/verifier/reward.txt", "w") as f:
    f.write("1\\n" if passed else "0\\n")
'''


def _unit_tests_task(
    env: Environment, grader: UnitTestsGrader, task: dict[str, Any], target: Path, where: tuple[str, int]
) -> None:
    if grader.config.cases is not None:
        raise DataError(
            "a unit_tests grader with `cases` cannot be exported yet (one run per case)",
            code="export_unsupported",
        )
    parts = grader.rendered(task, _MARK)
    head, _, tail = parts["program"].partition(_MARK)
    program: dict[str, Any] = {
        "head": head,
        "tail": tail,
        "timeout": grader.config.limits.wall_seconds,
        **({k: parts[k] for k in ("entry_point", "tests", "call") if k in parts}),
    }
    instruction = (
        _prompt_text(env, task)
        + "\n\nThere is no answer tool here: write the code you would submit (without a code fence) "
        "to `/app/solution.py`.\n"
    )
    _write(target / "instruction.md", instruction)
    _write(target / "task.toml", _task_toml(env, where, task, verifier_timeout=120))
    _write(target / "environment" / "Dockerfile", f"FROM {_BASE}\n\nWORKDIR /app\n")
    _write(target / "tests" / "program.json", json.dumps(program, indent=1) + "\n")
    _write(target / "tests" / "run_program.py", _UNIT_RUNNER)
    _write(target / "tests" / "test.sh", "#!/bin/bash\npython3 /tests/run_program.py\n", executable=True)
    gold = _gold(env, grader, task)
    code = extract_code(gold, grader.config.languages) or gold
    solve = "#!/bin/bash\n" + _heredoc("/app/solution.py", code)
    _write(target / "solution" / "solve.sh", solve, executable=True)


def _gold(env: Environment, grader: Any, task: dict[str, Any]) -> str:
    if env.spec.gold is not None:
        return Template(env.spec.gold, name="gold", base_dir=env.loaded.base_dir).render(task)
    target = grader.target(task)
    if target is None:
        raise DataError(
            "a task has no gold answer (no `gold:` and no grader reference)", code="export_unsupported"
        )
    return str(target)


def _repo_task(
    env: Environment, grader: RepoTestsGrader, task: dict[str, Any], target: Path, where: tuple[str, int]
) -> None:
    sandbox = env.spec.sandbox
    assert sandbox is not None and sandbox.repository is not None
    base = env.loaded.base_dir
    environment = target / "environment"
    if sandbox.build is not None and sandbox.build.dockerfile is not None:
        shutil.copytree(base / sandbox.build.context, environment)
        dockerfile = (base / sandbox.build.dockerfile).read_text(encoding="utf-8")
    else:
        environment.mkdir()
        dockerfile = f"FROM {sandbox.image}\n"
    _write(environment / "repo.tar", repository_tree(sandbox.repository, task, base))
    work = shlex.quote(sandbox.workdir)
    dockerfile = dockerfile.rstrip("\n") + (
        f"\n\n# The task's repository at its base commit, one commit and no history (envbuilder export).\n"
        f"COPY repo.tar /tmp/repo.tar\n"
        f"RUN mkdir -p {work} && tar -xf /tmp/repo.tar -C {work} && rm /tmp/repo.tar && cd {work} "
        "&& git init -q && git add -A && git -c user.name=envbuilder -c user.email=envbuilder@localhost "
        "commit -q -m base\n"
        + (f"RUN cd {work} && {sandbox.setup}\n" if sandbox.setup else "")
        + f"WORKDIR {work}\n"
    )
    _write(environment / "Dockerfile", dockerfile)
    cfg = grader.config
    tests = [
        *_tests(task.get(cfg.fail_to_pass), cfg.fail_to_pass),
        *_tests(task.get(cfg.pass_to_pass), cfg.pass_to_pass),
    ]
    patch = str(task.get(cfg.test_patch) or "")
    _write(target / "tests" / "test.patch", patch)
    files = " ".join(shlex.quote(f) for f in sorted({t.split("::", 1)[0] for t in tests}))
    reward = "/logs/verifier/reward.txt"
    script = (
        "#!/bin/bash\n"
        "# SWE-bench's rule: the hidden test patch on top, then every FAIL_TO_PASS and PASS_TO_PASS test\n"
        "# must pass (pytest exits 0 only when every selected test passed).\n"
        f"cd {work} || exit 1\n"
        f"{_GIT_ENV}\n"
        f"git checkout -q -- $(git diff --name-only -- {files}) 2>/dev/null\n"
        f"if ! git apply --whitespace=nowarn /tests/test.patch; then echo 0 > {reward}; exit 0; fi\n"
        "# The repository's code runs as another user where it can: it cannot write the verdict.\n"
        'as=""; command -v setpriv >/dev/null && as="setpriv --reuid=65534 --regid=65534 --clear-groups"\n'
        "$as python3 -m pytest -p no:cacheprovider -q -- " + " ".join(shlex.quote(t) for t in tests) + "\n"
        f"if [ $? -eq 0 ]; then echo 1 > {reward}; else echo 0 > {reward}; fi\n"
    )
    _write(target / "tests" / "test.sh", script, executable=True)
    instruction = (
        _prompt_text(env, task)
        + "\n\nThere is no submit tool here: your changes in the working folder are tested when you stop.\n"
    )
    _write(target / "instruction.md", instruction)
    _write(
        target / "task.toml",
        _task_toml(env, where, task, verifier_timeout=cfg.timeout_seconds),
    )
    gold = _gold(env, grader, task)
    _write(target / "solution" / "gold.patch", gold if gold.endswith("\n") else gold + "\n")
    _write(
        target / "solution" / "solve.sh",
        f'#!/bin/bash\n{_GIT_ENV}\ncd {work} && git apply --whitespace=nowarn "$(dirname "$0")/gold.patch"\n',
        executable=True,
    )
