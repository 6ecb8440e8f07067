"""The pydantic models a spec file is validated against (and its JSON Schema is made from)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from envbuilder.data import SourceConfig, sources
from envbuilder.graders import GraderConfig, graders
from envbuilder.plugins import ConfigModel, PluginField

SplitType = Literal["train", "validation", "test"]

DatasetField = Annotated[SourceConfig, PluginField(sources)]
GraderField = Annotated[GraderConfig, PluginField(graders)]


class SplitSpec(ConfigModel):
    """One split the environment serves, mapped onto a split of the dataset."""

    type: SplitType = "test"
    """What the split is for: `train`, `validation` or `test`."""
    source: str | None = None
    """The dataset split it is read from; defaults to the split's own name."""


class TaskShape(ConfigModel):
    """Which columns of a row make up the task JSON that clients see and templates use."""

    id: str | None = None
    """Column holding a stable task id; without it the id is `<split>-<index>`."""
    include: list[str] | None = None
    """Keep only these columns (default: all)."""
    exclude: list[str] = Field(default_factory=list)
    """Drop these columns."""
    rename: dict[str, str] = Field(default_factory=dict)
    """Rename columns: `{old_name: new_name}`."""


class PromptSpec(ConfigModel):
    """How a task becomes the prompt the model sees."""

    template: str | None = None
    """Inline Jinja template over the task's fields, e.g. `{{ question }}`."""
    template_file: str | None = None
    """A template file: a path relative to the spec, or the name of a template shipped in
    envbuilder's `templates/` folder (e.g. `prompts/math_final_answer.jinja`)."""
    system: str | None = None
    """Optional system prompt (a Jinja template); served as a system message in `/messages`."""

    @model_validator(mode="after")
    def _one_template(self) -> PromptSpec:
        if (self.template is None) == (self.template_file is None):
            raise ValueError("give exactly one of `template` or `template_file`")
        return self


class SubmitSpec(ConfigModel):
    """The tool the agent answers with."""

    name: str = Field(default="submit", pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    """The tool's name."""
    description: str = "Submit your final answer. The episode ends when the answer is graded."
    """The tool's description, shown to the model."""
    answer_field: str = Field(default="answer", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The name of the tool's single string parameter."""
    answer_description: str = "Your final answer."
    """The description of that parameter."""
    max_attempts: int = Field(default=1, ge=1)
    """How many answers an agent may submit; wrong answers before the last get feedback."""
    reward_correct: float = 1.0
    """Reward for a correct answer (scored graders scale between the two rewards)."""
    reward_incorrect: float = 0.0
    """Reward for an incorrect answer."""
    reveal_answer: bool = False
    """Whether the feedback after the last attempt tells the agent the correct answer."""


class GraderTest(ConfigModel):
    """A response and the reward the grader must give it (run by `envbuilder check`)."""

    response: str
    """What the agent submits, e.g. `The answer is 72.`"""
    reward: float | None
    """The reward it must get; `null` when it must be ungradeable (no reward at all)."""
    split: str | None = None
    """The split of the task it answers (default: the first split)."""
    index: int = 0
    """The index of the task in that split."""


class Spec(ConfigModel):
    """An envbuilder environment: a dataset, its splits, a prompt, a submit tool and a grader."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, frozen=True, title="envbuilder spec"
    )

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    """The environment's name in URLs (`/gsm8k/tools`): lowercase letters, digits, `-`, `_`."""
    title: str | None = None
    """A human-readable title."""
    description: str | None = None
    """What the environment tests."""
    tags: list[str] = Field(default_factory=list)
    """Free-form tags for catalogs."""
    license: str | None = None
    """The licence of the dataset (SPDX id or text)."""
    citation: str | None = None
    """How to cite the dataset."""
    version: str = "1"
    """The version of this environment."""
    dataset: DatasetField
    """Where the rows come from; `type:` names the source (e.g. `parquet`)."""
    splits: dict[str, SplitSpec] = Field(min_length=1)
    """The splits served, by name."""
    task: TaskShape = Field(default_factory=TaskShape)
    """The shape of the task JSON made from each row."""
    prompt: PromptSpec
    """How each task is rendered into a prompt."""
    submit: SubmitSpec = Field(default_factory=SubmitSpec)
    """The answer tool."""
    grader: GraderField
    """How a submitted answer is graded; `type:` names the grader (e.g. `exact_match`)."""
    extends: str | None = None
    """A spec this one extends, relative to this file: its keys are the defaults, mappings merge
    key by key, and any other value set here replaces the base's. Relative paths inherited from
    the base (data files, templates) resolve against this file's folder."""
    tests: list[GraderTest] = Field(default_factory=list)
    """Responses with the reward each must get, checked by `envbuilder check`."""
