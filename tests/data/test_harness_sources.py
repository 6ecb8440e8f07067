"""`type: nemo_gym` and `type: verifiers`: task files written for other harnesses, in their
public formats (NeMo Gym's resources-server JSONL with `responses_create_params`; a verifiers
dataset's rows as `Dataset.to_json` writes them), named as a spec's dataset, served and graded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from envbuilder.environment import Environment
from envbuilder.errors import SpecError
from envbuilder.spec import parse_spec

NEMO_LINES = [
    {  # as NeMo Gym's math resources server ships its tasks
        "responses_create_params": {
            "instructions": "Put your final answer in \\boxed{}.",
            "input": [{"role": "user", "content": "What is 6 times 7?"}],
        },
        "expected_answer": "42",
        "agent_ref": {"type": "responses_api_agents", "name": "math_simple_agent"},
    },
    {  # input as a string, with function tools
        "responses_create_params": {
            "input": "What is 2 to the power 10?",
            "tools": [{"type": "function", "name": "python", "parameters": {"type": "object"}}],
        },
        "expected_answer": "1024",
        "agent_ref": {"type": "responses_api_agents", "name": "math_simple_agent"},
    },
    {  # content as input_text parts
        "responses_create_params": {
            "input": [
                {"type": "message", "role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "input_text", "text": "What is 10 minus 3?"}]},
            ]
        },
        "expected_answer": "7",
        "test_cases": [{"input": "1"}, {"input": "2", "output": "3"}],  # objects of other shapes
    },
]

VF_LINES = [
    {  # a verifiers row: prompt messages, answer, info, task
        "prompt": [
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "How many legs has a spider?"},
        ],
        "answer": "8",
        "info": {"source": "zoo", "level": 1},
        "task": "legs",
    },
    {"question": "How many legs has an ant?", "answer": "6", "info": {"source": "zoo"}, "task": "legs"},
]

SPEC = """
name: imported
dataset:
  type: {kind}
  files: {{test: tasks.jsonl}}
splits: {{test: {{type: test}}}}
prompt:
  conversation: {{column: messages}}
grader:
  type: exact_match
  target: "{{{{ {answer} }}}}"
  extract: number
"""


def _env(tmp_path: Path, kind: str, lines: list[dict[str, Any]], answer: str) -> Environment:
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = SPEC.format(kind=kind, answer=answer)
    return Environment(parse_spec(text, file="imported.yaml", base_dir=tmp_path))


def _grade(env: Environment, index: int, answer: str) -> float | None:
    task = env.split("test").task(index)
    assert env.submit is not None
    return asyncio.run(env.submit.grader.grade(answer, task, {})).score


def test_a_nemo_gym_task_file_is_a_dataset(tmp_path: Path) -> None:
    env = _env(tmp_path, "nemo_gym", NEMO_LINES, "expected_answer")
    split = env.split("test")
    assert len(split) == 3
    first = env.prompt(split.task(0))
    assert "What is 6 times 7?" in "".join(b.text or "" for b in first)
    assert split.task(0)["messages"] == [
        {"role": "system", "content": "Put your final answer in \\boxed{}."},
        {"role": "user", "content": "What is 6 times 7?"},
    ]
    task = split.task(1)
    assert task["prompt"] == "What is 2 to the power 10?"
    assert json.loads(task["tools"])[0]["name"] == "python"
    assert json.loads(task["agent_ref"])["name"] == "math_simple_agent"  # objects as JSON text
    third = split.task(2)
    assert third["messages"][0] == {"role": "system", "content": "Be brief."}  # developer: system
    assert third["prompt"] == "What is 10 minus 3?"
    assert json.loads(third["test_cases"])[1] == {"input": "2", "output": "3"}
    assert [_grade(env, 0, "42"), _grade(env, 1, "1000"), _grade(env, 2, "7")] == [1.0, 0.0, 1.0]


def test_a_verifiers_taskset_is_a_dataset(tmp_path: Path) -> None:
    env = _env(tmp_path, "verifiers", VF_LINES, "answer")
    split = env.split("test")
    spider, ant = split.task(0), split.task(1)
    assert spider["messages"][0]["role"] == "system" and spider["prompt"] == "How many legs has a spider?"
    assert json.loads(spider["info"]) == {"source": "zoo", "level": 1} and spider["task"] == "legs"
    assert ant["messages"] == [{"role": "user", "content": "How many legs has an ant?"}]
    assert [_grade(env, 0, "8"), _grade(env, 1, "8")] == [1.0, 0.0]


@pytest.mark.parametrize(
    ("kind", "line", "message"),
    [
        ("nemo_gym", {"question": "x"}, "tasks.jsonl:1: no `responses_create_params` object"),
        (
            "nemo_gym",
            {"responses_create_params": {"input": [{"type": "function_call", "name": "f"}]}},
            "tasks.jsonl:1: the prompt holds a 'function_call' item",
        ),
        ("verifiers", {"answer": "1"}, "tasks.jsonl:1: neither `prompt` nor `question`"),
        ("nemo_gym", {"responses_create_params": {"input": []}}, "tasks.jsonl:1: the task's prompt is empty"),
    ],
)
def test_a_line_in_another_format_is_refused_naming_it(
    tmp_path: Path, kind: str, line: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        _env(tmp_path, kind, [line], "answer")


def _vf_spec(tmp_path: Path, files: str) -> Environment:
    text = SPEC.format(kind="verifiers", answer="answer").replace("{test: tasks.jsonl}", files)
    return Environment(parse_spec(text, file="imported.yaml", base_dir=tmp_path))


def _taskset() -> Any:
    """VF_LINES as a real ``datasets.Dataset``: ``info`` becomes a struct column, the messages
    a list of structs, and each row has every column (``prompt`` None where it has a
    ``question``; ``from_list`` takes the columns from the first row)."""
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_list([{"prompt": None, "question": None, **line} for line in VF_LINES])


def _check_zoo(env: Environment) -> None:
    split = env.split("test")
    spider, ant = split.task(0), split.task(1)
    assert spider["messages"] == VF_LINES[0]["prompt"] and spider["prompt"] == "How many legs has a spider?"
    assert json.loads(spider["info"]) == {"source": "zoo", "level": 1} and spider["task"] == "legs"
    assert ant["messages"] == [{"role": "user", "content": "How many legs has an ant?"}]
    assert json.loads(ant["info"]) == {"source": "zoo", "level": None}  # the struct's absent key
    assert [_grade(env, 0, "8"), _grade(env, 1, "8"), _grade(env, 1, "6")] == [1.0, 0.0, 1.0]


def test_a_folder_written_by_dataset_save_to_disk_is_a_verifiers_dataset(tmp_path: Path) -> None:
    _taskset().save_to_disk(str(tmp_path / "taskset"), num_shards=2)  # two shards, read in order
    env = _vf_spec(tmp_path, "{test: taskset}")
    _check_zoo(env)
    # What a pack or a catalog must carry to read it again: the shards and the folder's records.
    names = sorted(str(p.relative_to(tmp_path)) for p in env.source.files())
    assert names == [
        "taskset/data-00000-of-00002.arrow",
        "taskset/data-00001-of-00002.arrow",
        "taskset/dataset_info.json",
        "taskset/state.json",
    ]
    assert set(env.files) >= {f"taskset/{n}" for n in ("state.json", "data-00000-of-00002.arrow")}


def test_a_datasetdict_folder_gives_its_splits(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    zoo = _taskset()
    datasets.DatasetDict({"train": zoo.select([1]), "test": zoo}).save_to_disk(str(tmp_path / "zoo"))
    _check_zoo(_vf_spec(tmp_path, "{test: zoo}"))  # the source split of the same name
    _check_zoo(_vf_spec(tmp_path, "{test: zoo/test}"))  # or one split's folder
    datasets.DatasetDict({"train": zoo, "validation": zoo}).save_to_disk(str(tmp_path / "other"))
    with pytest.raises(SpecError) as refused:
        _vf_spec(tmp_path, "{test: other}")
    message = str(refused.value)
    assert (
        "dataset.files.test: 'other' is a DatasetDict folder (splits: train, validation) without a "
        in message
    )
    assert "split 'test'. Name one split's folder, e.g. 'other/train'" in message


def test_parquet_files_are_a_verifiers_dataset(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    _taskset().to_parquet(str(tmp_path / "parts" / "zoo.parquet"))
    _check_zoo(_vf_spec(tmp_path, "{test: parts/zoo.parquet}"))
    _check_zoo(_vf_spec(tmp_path, "{test: parts}"))  # a folder of Parquet files


def test_a_broken_save_to_disk_folder_is_refused_naming_it(tmp_path: Path) -> None:
    _taskset().save_to_disk(str(tmp_path / "taskset"))
    (tmp_path / "taskset" / "data-00000-of-00001.arrow").unlink()
    with pytest.raises(SpecError, match=r"'taskset': state.json lists \['data-00000-of-00001.arrow'\]"):
        _vf_spec(tmp_path, "{test: taskset}")


def test_a_pack_carries_a_save_to_disk_folder(tmp_path: Path) -> None:
    from envbuilder.catalog import load_pack, pack

    _taskset().save_to_disk(str(tmp_path / "taskset"))
    spec = tmp_path / "imported.yaml"
    spec.write_text(
        SPEC.format(kind="verifiers", answer="answer").replace("{test: tasks.jsonl}", "{test: taskset}")
    )
    pack(spec, tmp_path / "zoo.zip")
    _check_zoo(load_pack(tmp_path / "zoo.zip", cache_dir=tmp_path / "cache"))


def test_a_column_a_list_in_one_line_and_objects_in_another_is_json_text(tmp_path: Path) -> None:
    """As NeMo Gym's terminal_multi_harness tasks: `declared_tools` is `[]` in one line and a
    list of tool objects (kept as JSON text) in the next; one column holds JSON text for both."""
    tool = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
    lines = [{**NEMO_LINES[0], "declared_tools": []}, {**NEMO_LINES[1], "declared_tools": [tool]}]
    split = _env(tmp_path, "nemo_gym", lines, "expected_answer").split("test")
    assert json.loads(split.task(0)["declared_tools"]) == []
    assert json.loads(split.task(1)["declared_tools"]) == [tool]
