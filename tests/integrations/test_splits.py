"""Which split each trainer's adapter and verifiers' environment plays when none is named: the
spec's train split to train on, its held-out split to evaluate on; a spec without a train split
is never trained on by default."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import verifiers as vf

from envbuilder.environment import Environment, load_environment
from envbuilder.errors import TaskNotFound
from envbuilder.integrations import skyrl, trl, verl
from envbuilder.integrations import verifiers as vf_spec

SPEC = """\
name: held-out
dataset:
  type: jsonl
  files: {{{files}}}
splits:
{splits}
prompt:
  template: "{{{{ question }}}}"
grader:
  type: exact_match
  target: "{{{{ answer }}}}"
"""


def write_spec(folder: Path, splits: dict[str, str]) -> Environment:
    """A spec whose split ``name`` (of type ``splits[name]``) holds two tasks asking
    ``name-0?`` and ``name-1?``, each answered by its own name."""
    for name in splits:
        rows = [{"question": f"{name}-{i}?", "answer": f"{name}-{i}"} for i in range(2)]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    files = ", ".join(f"{name}: {name}.jsonl" for name in splits)
    lines = "\n".join(f"  {name}: {{type: {kind}}}" for name, kind in splits.items())
    spec = folder / "held_out.yaml"
    spec.write_text(SPEC.format(files=files, splits=lines))
    return load_environment(spec)


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    # no split is named train or test: only the types say which is which
    return write_spec(tmp_path, {"dev": "validation", "fit": "train", "held": "test"})


@pytest.fixture
def untrainable(tmp_path: Path) -> Environment:
    return write_spec(tmp_path, {"dev": "validation", "held": "test"})


def test_the_environment_names_its_training_and_evaluation_splits(env, untrainable) -> None:
    assert (env.training_split(), env.evaluation_split()) == ("fit", "held")
    assert (untrainable.training_split(), untrainable.evaluation_split()) == (None, "held")


def test_trl_trains_on_the_train_split(env) -> None:
    spec = trl.TRLSpec(env)
    assert spec.split == "fit" and len(spec.train_dataset) == 2
    rollout = spec.environment_factory()
    assert rollout.reset(task_index=1) == "fit-1?"
    rollout.submit(answer="fit-1")
    assert rollout.reward == 1.0
    assert trl.TRLSpec(env, split="held").environment_factory().reset(task_index=0) == "held-0?"


def test_skyrl_rows_and_episodes_are_the_train_split(env) -> None:
    rows = skyrl.dataset_rows(env.loaded.path)
    assert [r["split"] for r in rows] == ["fit", "fit"]
    assert "fit-1?" in json.dumps(rows[1]["prompt"])
    # a row without its split (written by hand) plays the train split too
    episode = skyrl.EnvbuilderTextEnv(extras={"spec": str(env.loaded.path), "task_index": 1})
    assert episode.episode.task["question"] == "fit-1?"


def test_verl_rows_and_scores_are_the_train_split(env) -> None:
    rows = verl.dataset_rows(env.loaded.path)
    assert [r["extra_info"]["split"] for r in rows] == ["fit", "fit"]
    assert rows[0]["prompt"][-1]["content"] == "fit-0?"
    where = {"spec": str(env.loaded.path), "index": 0}  # no split: the train split's task 0
    assert verl.compute_score("held-out", "fit-0", "", where)["score"] == 1.0
    assert verl.compute_score("held-out", "held-0", "", where)["score"] == 0.0


def test_trainers_refuse_a_spec_without_a_train_split_unless_one_is_named(untrainable) -> None:
    path = str(untrainable.loaded.path)
    for train in (
        lambda: trl.TRLSpec(untrainable),
        lambda: skyrl.dataset_rows(path),
        lambda: verl.dataset_rows(path),
        lambda: skyrl.EnvbuilderTextEnv(extras={"spec": path, "task_index": 0}),
        lambda: verl.compute_score("held-out", "x", "", {"spec": path, "index": 0}),
    ):
        with pytest.raises(TaskNotFound, match=r"no train split .*dev \(validation\), held \(test\)") as err:
            train()
        assert "split=" in (err.value.hint or "")
    assert [r["split"] for r in skyrl.dataset_rows(path, split="held")] == ["held", "held"]
    assert len(trl.TRLSpec(untrainable, split="dev").train_dataset) == 2


def _prompts(dataset) -> list[str]:
    return [row["prompt"][-1]["content"] for row in dataset]


def test_verifiers_trains_on_the_train_split_and_evaluates_on_the_test_split(env) -> None:
    loaded = vf_spec.load_environment(env)
    assert _prompts(loaded.get_dataset()) == ["fit-0?", "fit-1?"]
    assert _prompts(loaded.get_eval_dataset()) == ["held-0?", "held-1?"]
    # a rollout plays the task of the row it was given, from either dataset
    for dataset, question in ((loaded.get_dataset(), "fit-1?"), (loaded.get_eval_dataset(), "held-1?")):
        state = asyncio.run(loaded.setup_state({"info": dataset[1]["info"]}))
        assert state["envbuilder_episode"].task["question"] == question
        assert "answer" not in json.dumps(dataset[1]) or dataset[1]["answer"] == ""
    # one named split is both datasets
    named = vf_spec.load_environment(env, split="dev", num_tasks=1)
    assert _prompts(named.get_dataset()) == _prompts(named.get_eval_dataset()) == ["dev-0?"]
    with pytest.raises(TaskNotFound, match="unknown split 'nope'"):
        vf_spec.load_environment(env, split="nope")


def test_verifiers_has_no_training_dataset_without_a_train_split(untrainable) -> None:
    loaded = vf.load_environment("envbuilder.integrations.verifiers", spec=str(untrainable.loaded.path))
    assert loaded.dataset is None and loaded.dataset_source is None
    assert _prompts(loaded.get_eval_dataset()) == ["held-0?", "held-1?"]
