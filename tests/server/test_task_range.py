"""Listing a whole split with ``/task_range`` (no bounds): both reference clients get every task,
long ranges are streamed in batches with bounded memory, and past the cap a 400 says how to page."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, _ops, create_app
from envbuilder.spec import parse_spec
from tests.servers import serve_app

ROWS = 100_000

SPEC = """\
name: big
dataset: {type: parquet, files: {train: big.parquet}}
splits: {train: {type: train}}
task: {id: key}
prompt: {template: "What is {{ a }} + {{ b }}?"}
grader: {type: exact_match, target: "{{ a + b }}", extract: number}
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder = tmp_path_factory.mktemp("big")
    table = pa.table(
        {
            "key": [f"row-{i}" for i in range(ROWS)],
            "a": list(range(ROWS)),
            "b": [7] * ROWS,
        }
    )
    pq.write_table(table, folder / "big.parquet")
    return Environment(parse_spec(SPEC, file="big.yaml", base_dir=Path(folder)))


@pytest.fixture(scope="module")
def big_url(big: Environment) -> Iterator[str]:
    with serve_app(create_app([big], ServerSettings())) as url:
        yield url


def test_openreward_lists_gsm8k_train_whole(gsm8k_url: str, gsm8k: Environment) -> None:
    from openreward import EnvironmentsAPI

    env = EnvironmentsAPI(base_url=gsm8k_url, api_key=None).get(name="gsm8k", variant="gsm8k")
    tasks = env.get_task_range("train")
    assert len(tasks) == 7473
    assert [t.task_spec["id"] for t in tasks[:2]] == ["train-0", "train-1"]
    assert tasks[-1].task_spec == gsm8k.public(gsm8k.split("train").task(7472))
    assert all("answer" not in t.task_spec for t in tasks)  # the gold stays private
    assert {t.environment_name for t in tasks} == {"gsm8k"}
    assert len(env.get_task_range("train", start=-1500)) == 1500  # streamed, from a start


@pytest.mark.parametrize("client", ["openreward", "ors"])
def test_both_clients_list_a_100k_split(big_url: str, client: str) -> None:
    if client == "ors":
        from ors.client import ORS

        with ORS(base_url=big_url) as c:
            tasks = c.environment("big").get_task_range("train")
    else:
        from openreward import EnvironmentsAPI

        tasks = (
            EnvironmentsAPI(base_url=big_url, api_key=None)
            .get(name="big", variant="big")
            .get_task_range("train")
        )
    assert len(tasks) == ROWS
    assert [t.task_spec["id"] for t in (tasks[0], tasks[54_321], tasks[-1])] == [
        "row-0",
        "row-54321",
        "row-99999",
    ]


def test_streaming_holds_one_batch_not_the_split(big: Environment) -> None:
    """The streamed body of 100,000 tasks passes through while memory holds about one batch."""
    app = create_app([big], ServerSettings())
    ctx = app.state.context
    span = _ops.task_range_span(ctx, "big", "train", None, None)

    async def drain() -> tuple[int, int]:
        total = 0
        tracemalloc.start()
        try:
            async for chunk in _ops.stream_tasks(ctx, "big", "train", span):
                total += len(chunk)
            return total, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    total, peak = asyncio.run(drain())
    assert total > 5_000_000  # the whole split went through ...
    assert peak < total / 4, (total, peak)  # ... without ever being held whole


@pytest.mark.parametrize("fast", [True, False])
def test_past_the_cap_a_400_says_how_to_page(big: Environment, fast: bool) -> None:
    app = create_app([big], ServerSettings(max_task_range=30_000))
    app.front.fast = fast

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return [
                await c.post("/big/task_range", json={"split": "train"}),
                await c.post("/big/task_range", json={"split": "train", "start": 10, "stop": 30_010}),
                await c.post("/big/task_range", json={"split": "train", "start": 10, "stop": 1_510}),
            ]

    too_many, page, small = asyncio.run(go())
    assert too_many.status_code == 400
    assert too_many.json() == {
        "detail": "task_range lists at most 30,000 tasks at once and this range has 100,000: page with "
        'start and stop ({"start": 0, "stop": 30000}, then {"start": 30000, "stop": 60000}, ...), '
        "or stream /tasks"
    }
    assert page.status_code == 200 and len(page.json()["tasks"]) == 30_000
    assert page.json()["tasks"][0]["id"] == "row-10" and page.json()["env_name"] == "big"
    assert [t["id"] for t in small.json()["tasks"][:1]] == ["row-10"] and len(small.json()["tasks"]) == 1500


def test_both_doors_stream_a_long_range_alike(big: Environment) -> None:
    """A range of more than one page and a whole split (``/tasks``) are streamed by the lean
    door too, byte for byte as FastAPI streams them."""
    fast, plain = create_app([big]), create_app([big])
    plain.front.fast = False
    requests = [
        ("/big/task_range", {"split": "train", "start": 5, "stop": 20_005}),
        ("/big/tasks", {"split": "train"}),
    ]

    async def go(app: object) -> list[tuple[int, str | None, str | None, bytes]]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            out = []
            for path, body in requests:
                r = await c.post(path, json=body)
                headers = r.headers
                out.append(
                    (r.status_code, headers.get("content-type"), headers.get("content-length"), r.content)
                )
            return out

    via_fast, via_fastapi = asyncio.run(go(fast)), asyncio.run(go(plain))
    assert via_fast == via_fastapi
    assert [a[:3] for a in via_fast] == [(200, "application/json", None)] * 2
    assert len(httpx.Response(200, content=via_fast[0][3]).json()["tasks"]) == 20_000
    assert fast.front.served == 2 and plain.front.served == 0
