"""A served task always comes back: ``env.session(task=env.get_task(split, i))``, the reference
clients' standard flow, with the task taken from one replica and the session created on
another (two real servers sharing a real Redis store), after a whole split was streamed, on
every shipped spec and on a carved, shuffled split; with both clients (``ors`` and
``openreward``). The session is graded against the stored row, private fields included; a task
whose id names no row, or whose content differs from the row it names, is refused."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from envbuilder.catalog import load_environments
from envbuilder.environment import Environment, load_environment
from envbuilder.server import ServerSettings, create_app
from envbuilder.templating import Template
from tests.conftest import ENVS
from tests.servers import serve_app

GSM8K = ENVS / "data/gsm8k"

CARVED = f"""\
name: carved
dataset:
  type: parquet
  files: {{train: {GSM8K / "train-00000-of-00001.parquet"}, test: {GSM8K / "test-00000-of-00001.parquet"}}}
splits:
  train: {{type: train, shuffle: true, seed: 3}}
  validation: {{type: validation, carve_from: train, fraction: 0.05, seed: 1}}
  test: {{type: test}}
prompt: {{template: "{{{{ question }}}}"}}
grader:
  type: exact_match
  target: "{{{{ answer.split('####')[-1] }}}}"
  extract: number
"""


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> list[Environment]:
    loaded = load_environments([ENVS])
    assert not loaded.failures, loaded.failures
    spec = tmp_path_factory.mktemp("carved") / "carved.yaml"
    spec.write_text(CARVED)
    return [*loaded.envs, load_environment(spec)]


@pytest.fixture(scope="module")
def replicas(envs: list[Environment], redis_session: object) -> Iterator[tuple[str, str]]:
    from tests.redisd import RedisServer

    assert isinstance(redis_session, RedisServer)
    if redis_session.process is None:
        redis_session.start()
    redis_session.flush()
    settings = ServerSettings(store=redis_session.url)
    with serve_app(create_app(envs, settings)) as a, serve_app(create_app(envs, settings)) as b:
        yield a, b


def _indices(n: int) -> list[int]:
    return sorted({0, n // 2, n - 1})


STREAMED = 200_000
"""The largest split streamed whole (generated splits run to a billion tasks)."""


def _longest(env: Environment) -> str:
    """The longest split of at most :data:`STREAMED` tasks."""
    return max((s for s in env.splits if len(env.splits[s]) <= STREAMED), key=lambda s: len(env.splits[s]))


def _gold(env: Environment, split: str, index: int) -> str | None:
    """The spec's gold answer of a task when it has a plain one (an answer tool, no actions)."""
    if env.submit is None or env.submit.user is not None or env.submit.dialogue is not None:
        return None
    if env.spec.gold_actions or env.spec.gold is None:
        return None
    gold = Template(env.spec.gold, name="gold", base_dir=env.loaded.base_dir)
    return gold.render(env.splits[split].task(index))


def test_streamed_then_sent_back_to_the_other_replica_with_ors(
    envs: list[Environment], replicas: tuple[str, str]
) -> None:
    from ors.client import ORS

    a, b = replicas
    with ORS(base_url=a) as ca, ORS(base_url=b) as cb:
        for env in envs:
            name = env.name
            served = ca.environment(name)
            longest = _longest(env)
            assert len(served.get_task_range(longest)) == len(env.splits[longest])  # a whole split
            for split, view in env.splits.items():
                for i in _indices(len(view)):
                    task = served.get_task(split, i)
                    with cb.environment(name).session(task=task) as session:
                        prompt = session.get_prompt()
                        row = view.task(i)
                        expected = [blk.text for blk in env.prompt(row) if getattr(blk, "text", None)]
                        assert [p.text for p in prompt if p.type == "text"] == expected, (name, split, i)


def test_sent_back_to_the_other_replica_with_openreward_and_graded_against_the_stored_row(
    envs: list[Environment], replicas: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from openreward import EnvironmentsAPI

    a, b = replicas
    monkeypatch.setenv("OPENREWARD_SESSION_URL", b)  # sessions on the replica that served nothing
    graded = 0
    for env in envs:
        first = EnvironmentsAPI(base_url=a, api_key=None).get(name=env.name)
        other = EnvironmentsAPI(base_url=b, api_key=None).get(name=env.name)
        for split, view in env.splits.items():
            for i in _indices(len(view)):
                task = first.get_task(split, i)
                assert task.task_spec == env.public(view.task(i))
                with other.session(task=task) as session:
                    assert session.get_prompt()
                    gold = _gold(env, split, i)
                    if gold is not None and env.submit is not None and env.private_fields:
                        spec = env.submit.spec
                        out = session.call_tool(tool_name=spec.name, input={spec.answer_field: gold})
                        assert out.reward == spec.reward_correct, (env.name, split, i, out.metadata)
                        graded += 1
    assert graded >= 6  # gold answers that only the stored row's private fields can grade


def test_a_task_that_names_no_row_or_differs_from_it_is_refused(
    envs: list[Environment], replicas: tuple[str, str]
) -> None:
    _, b = replicas
    for env in envs:
        split = next(iter(env.splits))
        row = env.public(env.splits[split].task(0))
        changed = next((k for k, v in row.items() if k != "id" and isinstance(v, str)), None)
        bad = [{**row, "id": f"{row['id']}-not-served"}]
        if changed is not None:
            bad.append({**row, changed: row[changed] + " (changed)"})
        for task in bad:
            reply = httpx.post(
                f"{b}/create",
                json={"env_name": env.name, "task_spec": task},
                headers={"X-Session-ID": "refused"},
            )
            assert reply.status_code == 403, (env.name, task.get("id"), reply.text)


def test_the_carved_and_shuffled_splits_resolve_by_id(
    envs: list[Environment], replicas: tuple[str, str]
) -> None:
    env = next(e for e in envs if e.name == "carved")
    _, b = replicas
    for split in ("train", "validation"):
        view = env.splits[split]
        task = view.task(len(view) - 1)
        reply = httpx.post(
            f"{b}/create",
            json={"env_name": "carved", "task_spec": env.public(task)},
            headers={"X-Session-ID": f"carved-{split}"},
        )
        assert reply.status_code == 200, reply.text
