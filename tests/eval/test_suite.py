"""Many environments in one run (``eval FOLDER --envs a,b``, several specs, a server's several
environments), and the choices a run must not make silently."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envbuilder.cli import app
from envbuilder.environment import load_environment
from envbuilder.server import create_app
from tests.eval.conftest import arithmetic_answer, prompt_of, write_arithmetic
from tests.fakes.chat_server import ChatServer, tool_call_reply
from tests.servers import serve_app


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def answering(wrong=lambda kind, n: False):
    def handler(req: dict[str, Any], i: int):
        answer = arithmetic_answer(prompt_of(req), wrong)
        return 200, tool_call_reply("submit", json.dumps({"answer": answer})), {}

    return handler


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_arithmetic(tmp_path / "envs")


def test_a_folder_with_envs_runs_each_and_resumes_as_a_whole(folder: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["eval", str(folder), "--envs", "square,cube", "--model", "m", "--limit", "3", "--out", str(run)]
    with ChatServer(answering(lambda kind, n: kind == "cube" and n == 3)) as server:
        result = cli(*args, "--base-url", server.base_url)
        assert result.exit_code == 0, result.output
        assert len(server.requests) == 6  # --limit is per environment
        assert "envbuilder: 2 environments: square, cube" in result.output
        assert "square/test: 3 episodes" in result.output and "cube/test: 3 episodes" in result.output
        suite = json.loads((run / "suite.json").read_text())
        assert set(suite["environments"]) == {"square", "cube"}
        assert suite["environments"]["square"]["results"] == "square.jsonl"
        assert suite["environments"]["cube"]["summary"]["mean_reward_all"]["mean"] == pytest.approx(2 / 3)
        assert suite["macro_mean_reward_all"] == pytest.approx((1 + 2 / 3) / 2)
        table = result.output[result.output.index("m on 2 environments") :]
        assert "macro mean" in table and "0.833" in table
        assert (run / "square.jsonl").exists() and (run / "cube.jsonl").exists()
        again = cli(*args, "--base-url", server.base_url)
        assert again.exit_code == 0, again.output
        assert len(server.requests) == 6  # resumed: nothing left to run
        assert again.output.count("3 already in") == 2


def test_several_spec_files_and_an_out_file(folder: Path) -> None:
    result = cli("eval", str(folder / "square.yaml"), str(folder / "cube.yaml"), "--model", "m",
                 "--base-url", "http://127.0.0.1:9/v1", "--out", "x.jsonl")  # fmt: skip
    assert result.exit_code == 1
    assert (
        "error: --out x.jsonl: a run of 2 environments writes one results file per environment"
        in result.output
    )
    assert "Give a folder, e.g. --out x" in result.output


def test_an_unknown_env_name_gets_did_you_mean(folder: Path) -> None:
    result = cli(
        "eval", str(folder), "--envs", "sqaure", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"
    )
    assert result.exit_code == 1, result.output
    assert "has no environment 'sqaure'" in result.output
    assert "Did you mean 'square'? Environments: cube, square" in result.output


@pytest.fixture
def two_env_url(folder: Path):
    envs = [load_environment(folder / "square.yaml"), load_environment(folder / "cube.yaml")]
    with serve_app(create_app(envs)) as url:
        yield url


def test_a_multi_environment_url_needs_env(two_env_url: str) -> None:
    base = ["eval", two_env_url, "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    result = cli(*base)
    assert result.exit_code == 1
    assert f"error: {two_env_url} serves 2 environments: square, cube" in result.output
    assert "Name one with --env" in result.output
    wrong = cli(*base, "--env", "cub")
    assert wrong.exit_code == 1
    assert (
        "--env 'cub': " in wrong.output and "Did you mean 'cube'? Environments: square, cube" in wrong.output
    )


def test_a_multi_environment_url_with_envs(two_env_url: str, tmp_path: Path) -> None:
    with ChatServer(answering()) as server:
        result = cli("eval", two_env_url, "--envs", "cube,square", "--model", "m", "--base-url",
                     server.base_url, "--limit", "2", "--out", str(tmp_path / "run"))  # fmt: skip
        one = cli("eval", two_env_url, "--env", "cube", "--model", "m", "--base-url", server.base_url,
                  "--limit", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    header = json.loads((tmp_path / "run" / "cube.jsonl").read_text().splitlines()[0])
    assert header["run"]["server"] == two_env_url and header["run"]["env"] == "cube"
    assert one.exit_code == 0 and "cube/test: 2 episodes" in one.output


def test_an_unknown_group_by_is_an_error_before_any_model_call(folder: Path) -> None:
    with ChatServer(answering()) as server:
        result = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                     "--group-by", "partiy")  # fmt: skip
        assert server.requests == []
    assert result.exit_code == 1
    assert "error: --group-by 'partiy': square's tasks have no such field" in result.output
    assert "Did you mean 'parity'? Fields: id, n, parity" in result.output


def test_view_reads_the_runs_grouping_and_refuses_an_unknown_one(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with ChatServer(answering()) as server:
        result = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                     "--group-by", "parity", "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "by parity" in result.output
    assert cli("view", str(out)).exit_code == 0
    page = out.with_suffix(".html").read_text()
    assert "parity" in page and "even" in page and "odd" in page
    bad = cli("view", str(out), "--group-by", "nn")
    assert bad.exit_code == 1 and "--group-by 'nn': the run's tasks have no such field" in bad.output
    compared = cli("eval", "compare", str(out), str(out), "--group-by", "partiy")
    assert compared.exit_code == 1
    assert "--group-by 'partiy': run A's tasks have no such field. Did you mean 'parity'?" in compared.output


def test_group_by_names_a_field_of_a_task_object_by_its_dotted_name(folder: Path, tmp_path: Path) -> None:
    # HF datasets often nest what a run is grouped by (`metadata.difficulty`)
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = folder / "data" / "square.parquet"
    table = pq.read_table(data)
    meta = [{"size": "small" if n < 5 else "big", "deep": {"bucket": n % 2}} for n in table["n"].to_pylist()]
    pq.write_table(table.append_column("meta", pa.array(meta)), data)
    out = tmp_path / "r.jsonl"
    with ChatServer(answering(lambda kind, n: n >= 5)) as server:
        result = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                     "--group-by", "meta.size", "--out", str(out))  # fmt: skip
        assert result.exit_code == 0, result.output
        unknown = cli("eval", str(folder / "square.yaml"), "--model", "m", "--base-url", server.base_url,
                      "--group-by", "meta.sise")  # fmt: skip
    assert "by meta.size" in result.output
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    groups = {
        k: (v["episodes"], v["accuracy_graded"]["mean"]) for k, v in summary["summary"]["groups"].items()
    }
    assert groups == {"small": (3, 1.0), "big": (3, 0.0)}  # n = 2, 3, 4 right; 5, 6, 7 wrong
    records = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    assert {r["task"]["meta.deep.bucket"] for r in records} == {0, 1}
    # a grouping chosen later reads the same records, two objects deep
    by_bucket = cli("view", str(out), "--group-by", "meta.deep.bucket")
    assert by_bucket.exit_code == 0, by_bucket.output
    assert unknown.exit_code == 1 and "Did you mean 'meta.size'?" in unknown.output
    assert "Fields: id, meta.deep.bucket, meta.size, n, parity" in unknown.output


def test_a_run_on_a_train_split_says_so_unless_it_was_asked_for(folder: Path) -> None:
    spec = folder / "square.yaml"
    text = (
        spec.read_text()
        .replace("test: data/", "train: data/")
        .replace("test: {type: test}", "train: {type: train}")
    )
    spec.write_text(text)
    with ChatServer(answering()) as server:
        chosen = cli("eval", str(spec), "--model", "m", "--base-url", server.base_url, "--limit", "1")
        named = cli("eval", str(spec), "--model", "m", "--base-url", server.base_url, "--limit", "1",
                    "--split", "train")  # fmt: skip
    assert chosen.exit_code == 0 and named.exit_code == 0, chosen.output + named.output
    note = "note: train is a train split (square has no test or validation split): these are training-set"
    assert note in " ".join(chosen.output.split())
    assert "square/train: 1 episodes" in named.output and "note:" not in named.output


def test_compare_prints_sampling_options_as_options(folder: Path, tmp_path: Path) -> None:
    runs = []
    with ChatServer(answering()) as server:
        for name, extra in (
            ("a", []),
            ("b", ["--temperature", "0.7", "--extra-body", '{"reasoning_effort": "low"}']),
        ):
            runs.append(tmp_path / f"{name}.jsonl")
            result = cli("eval", str(folder / "square.yaml"), "--model", name, "--base-url", server.base_url,
                         "--out", str(runs[-1]), *extra)  # fmt: skip
            assert result.exit_code == 0, result.output
    text = cli("eval", "compare", *map(str, runs)).output
    assert (
        "note: the sampling options differ: the endpoint's defaults (A), "
        '--temperature 0.7 --extra-body {"reasoning_effort": "low"} (B)'
    ) in text
    assert "{'temperature'" not in text


def test_ctrl_c_says_how_to_resume(folder: Path, tmp_path: Path) -> None:
    """A real process, a real SIGINT: the message names the file and the command to rerun."""

    interrupted = threading.Event()

    def slow(req: dict[str, Any], i: int):
        # Later model calls wait for the interrupt (5 s each at most: 25 s before the run could
        # finish), so one episode is done and the run is still going when the signal comes.
        if i >= 1:
            interrupted.wait(5)
        time.sleep(0.3)
        return answering()(req, i)

    out = tmp_path / "r.jsonl"
    with ChatServer(slow) as server:
        args = [sys.executable, "-m", "envbuilder", "eval", str(folder / "square.yaml"), "--model", "m",
                "--base-url", server.base_url, "--concurrency", "1", "--out", str(out)]  # fmt: skip
        # SIGINT as a terminal gives it (a suite started in the background, `cmd &`, ignores SIGINT,
        # and its children would inherit that).
        default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
        with subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
        ) as proc:
            deadline = time.monotonic() + 120
            while len(server.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=120)
            finally:
                interrupted.set()
                proc.kill()
        assert proc.returncode == 130, err
        assert f"envbuilder: interrupted; the episodes that finished are saved in {out}." in err
        assert "Rerun the same command to resume:" in err and "Traceback" not in err
        done = len(out.read_text().splitlines()) - 1
        assert 1 <= done < 6
        again = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"{done} already in {out}" in again.stderr + again.stdout


def test_a_published_catalog_with_envs(folder: Path, tmp_path: Path) -> None:
    """`eval https://…/catalog.json --envs a,b`: the packs are pulled, verified and run in-process."""
    from envbuilder.catalog import publish
    from tests.stores import static_http

    site = tmp_path / "site"
    publish([folder / "square.yaml", folder / "cube.yaml"], str(site))
    with static_http(site) as base, ChatServer(answering(lambda kind, n: kind == "square")) as server:
        result = cli("eval", f"{base}/catalog.json", "--envs", "square,cube", "--model", "m", "--base-url",
                     server.base_url, "--limit", "2", "--out", str(tmp_path / "run"))  # fmt: skip
        unknown = cli("eval", f"{base}/catalog.json", "--envs", "cubes", "--model", "m", "--base-url",
                      server.base_url)  # fmt: skip
    assert result.exit_code == 0, result.output
    table = result.output[result.output.index("m on 2 environments") :]
    assert re.search(r"square\s+2\s+0\.000", table) and re.search(r"cube\s+2\s+1\.000", table)
    assert re.search(r"macro mean\s+4\s+0\.500", table)
    header = json.loads((tmp_path / "run" / "cube.jsonl").read_text().splitlines()[0])
    assert header["run"]["server"] is None and header["run"]["env_hash"].startswith("sha256:")
    assert unknown.exit_code == 1
    assert (
        "error: no environment 'cubes' in the catalog" in unknown.output
        and "It lists: cube, square" in unknown.output
    )
