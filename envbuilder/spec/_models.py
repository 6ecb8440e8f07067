"""The pydantic models a spec file is validated against (and its JSON Schema is made from)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from envbuilder.plugins import ConfigModel, PluginField
from envbuilder.spec._container import ContainerSpec
from envbuilder.spec._plugins import (
    GraderConfig,
    SourceConfig,
    ToolConfig,
    api_root,
    graders,
    parse_slice,
    sources,
    tools,
)

SplitType = Literal["train", "validation", "test"]

DatasetField = Annotated[SourceConfig, PluginField(sources)]
GraderField = Annotated[GraderConfig, PluginField(graders)]
ToolField = Annotated[ToolConfig, PluginField(tools)]
#: An environment's name: it appears in URLs (`/gsm8k/tools`), file names and catalog links.
ENV_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"


class SplitSpec(ConfigModel):
    """One split the environment serves, mapped onto a split of the dataset."""

    type: SplitType = "test"
    """What the split is for: `train`, `validation` or `test`."""
    source: str | None = None
    """The dataset split it is read from; defaults to the split's own name."""
    files: str | list[str] | None = None
    """Instead of a dataset split: a file, glob, directory or list of them, in the dataset's
    format (relative to the spec file)."""
    filter: str | None = None
    """Keep only the rows for which this expression is true, e.g. `level >= 3`. A sandboxed
    Jinja expression over the row's columns (before `task.rename`); computed once and cached."""
    slice: str | None = None
    """Keep rows `[start:stop]` (after the filter), in rows or percent: `[:1000]`, `[10%:20%]`."""
    profile: str | None = None
    """A per-task table written by `envbuilder profile` (relative to the spec file): the split
    keeps only the tasks profiled there, and `filter` can also use their `pass_rate`,
    `mean_reward`, `tokens` and `samples`, e.g. `pass_rate > 0 and pass_rate < 1`."""
    shuffle: bool = False
    """Serve the rows in a pseudo-random order fixed by `seed`."""
    seed: int = 0
    """The seed of `shuffle` and of `carve_from`."""
    limit: int | None = Field(default=None, ge=0)
    """Serve at most this many rows (after shuffling)."""
    carve_from: str | None = None
    """Carve this split out of another split of this spec: it takes a seeded random `fraction`
    of that split's rows, and that split keeps only the rest (the two are disjoint)."""
    fraction: float | None = Field(default=None, gt=0, lt=1)
    """With `carve_from`: the fraction of the other split's rows this split takes."""

    @field_validator("slice")
    @classmethod
    def _slice_syntax(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_slice(value)
            except ValueError as exc:
                raise ValueError(f"{exc} (got {value!r})") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SplitSpec:
        if self.source is not None and self.files is not None:
            raise ValueError("give at most one of `source` or `files`")
        if (self.carve_from is None) != (self.fraction is None):
            raise ValueError("`carve_from` and `fraction` go together")
        if self.carve_from is not None:
            taken = [
                k for k in ("source", "files", "filter", "slice", "profile") if getattr(self, k) is not None
            ]
            if taken:
                raise ValueError(
                    f"a carved split takes its rows from `carve_from`; `{taken[0]}` belongs on that split"
                )
        return self


class TaskShape(ConfigModel):
    """Which columns of a row make up the task JSON that clients see and templates use."""

    id: str | None = None
    """Column holding a stable task id. Without it the id is `<split>-<row>`: the dataset split's
    name and the row's number in it, so ids survive changes to slices, filters and shuffles."""
    include: list[str] | None = None
    """Keep only these columns (default: all)."""
    exclude: list[str] = Field(default_factory=list)
    """Drop these columns."""
    rename: dict[str, str] = Field(default_factory=dict)
    """Rename columns: `{old_name: new_name}`."""
    private: list[str] | None = None
    """Fields the grader reads but clients never see in `/task`, `/task_range` or `/tasks`
    (the server grades against the full row). Default: the fields only the grader reads (the
    gold answer); `[]` shows every field."""


Role = Literal["system", "user", "assistant"]


class TurnSpec(ConfigModel):
    """One turn of a conversation written in the spec: a role and a template."""

    role: Role
    """Who speaks: `system`, `user` or `assistant`."""
    template: str | None = None
    """Inline Jinja template for the turn's text."""
    template_file: str | None = None
    """A template file (relative to the spec, or shipped in `templates/`)."""
    images: list[str] = Field(default_factory=list)
    """Task fields holding images, placed before the turn's text."""

    @model_validator(mode="after")
    def _one_template(self) -> TurnSpec:
        if self.template is not None and self.template_file is not None:
            raise ValueError("give at most one of `template` or `template_file`")
        if self.template is None and self.template_file is None and not self.images:
            raise ValueError("a turn needs `template`, `template_file` or `images`")
        return self


class ConversationSpec(ConfigModel):
    """A task field that already holds the conversation: a list of turns."""

    column: str
    """The task field holding the turns, e.g. `messages` (a list, or JSON text of one)."""
    role_key: str = "role"
    """The key of each turn holding its role."""
    content_key: str = "content"
    """The key of each turn holding its content: a string, or a list of blocks in the ORS wire
    shape (`{type: text, text: ...}`, `image`, `reasoning`, `tool_call`, `tool_result`).
    Use `blocks` for turns stored as canonical ORS messages."""
    roles: dict[str, Role] = Field(default_factory=dict)
    """Map the data's role names to ORS roles, e.g. `{human: user, gpt: assistant}`."""


class FewShotSpec(ConfigModel):
    """Worked examples shown before the task, drawn from a split."""

    split: str
    """The split the examples come from (one of `splits:`). When it is the task's own split,
    the task being asked is never among its examples."""
    n: int = Field(ge=1, le=64)
    """How many examples."""
    select: Literal["first", "random"] = "first"
    """`first`: the split's first examples; `random`: a seeded random sample (the same sample
    for every task)."""
    seed: int = 0
    """The seed of `random` selection."""
    style: Literal["turns", "inline"] = "turns"
    """`turns`: each example is a prior user turn (its question) and an assistant turn (its
    answer), placed after the leading system messages and before the task's own turns (with
    `turns` or `conversation` too); `inline`: examples are written into the user prompt before
    the task, each as its question, a newline and its answer (with `turns`: before the first
    user turn's text; with `conversation`: before the first text of the first user message)."""
    answer: str
    """Jinja template over an example giving its answer, e.g. `Answer: {{ answer | letter }}`."""
    template: str | None = None
    """Jinja template for an example's question. Default: the prompt's own `template` or
    `template_file` (with its `images`); with `turns`, the template and images of the single
    `user` turn. Required with `conversation`, and with `turns` holding several user turns
    (examples then show only this text)."""
    separator: str = "\n\n"
    """With `inline`: the text between examples (and between the last example and the task)."""


class PromptSpec(ConfigModel):
    """How a task becomes what the model sees: one prompt, or a role-tagged conversation.

    Give exactly one of `template`, `template_file`, `turns` or `conversation`."""

    template: str | None = None
    """Inline Jinja template over the task's fields, e.g. `{{ question }}`."""
    template_file: str | None = None
    """A template file: a path relative to the spec, or the name of a template shipped in
    envbuilder's `templates/` folder (e.g. `prompts/math_final_answer.jinja`)."""
    system: str | None = None
    """Optional system prompt (a Jinja template), served as a leading system message in
    `/messages`; `/prompt` then flattens the conversation (`[system]`/`[user]` headers)."""
    images: list[str] = Field(default_factory=list)
    """Task fields holding images (HF image structs, bytes or base64 strings), placed before the
    prompt's text as image blocks."""
    turns: list[TurnSpec] | None = Field(default=None, min_length=1)
    """A conversation written as a list of turns, each a template."""
    conversation: ConversationSpec | None = None
    """A conversation read from a task field holding the turns."""
    few_shot: FewShotSpec | None = None
    """Worked examples before the task, drawn from a split: prior user/assistant turns or
    inline text; with `turns` and `conversation` prompts they follow the leading system
    messages."""

    @model_validator(mode="after")
    def _one_template(self) -> PromptSpec:
        given = [
            k for k in ("template", "template_file", "turns", "conversation") if getattr(self, k) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of `template`, `template_file`, `turns` or `conversation`"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.images and given[0] in ("turns", "conversation"):
            raise ValueError("with `turns`, give `images` on a turn; a conversation carries its own images")
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
    on_ungradeable: Literal["no_reward", "incorrect", "retry"] = "no_reward"
    """When an answer cannot be graded (nothing extractable, judge unreachable or unclear):
    `no_reward` counts the attempt with reward `null` and says why; `incorrect` scores it as
    a wrong answer, explicitly; `retry` does not count the attempt and lets the agent answer
    again (at most `max_attempts` such retries per episode, then `no_reward`)."""
    max_answer_chars: int = Field(default=100_000, ge=1)
    """Longer answers are refused as invalid tool input."""
    terminal_tool: bool = False
    """Also advertise the answer tool as the listings' `terminal_tool` (its `arg` is
    `answer_field`): harnesses that support it (openreward's `call_terminal_tool`) pass the
    model's plain final message to it. It stays in `tools` too, for harnesses that do not."""
    feedback: str | None = None
    """What the agent is told after a graded answer, as a Jinja template (default: `Correct!`,
    `Incorrect.` or `Partially correct (score 0.50).`, then the attempts left). It sees the
    task's fields and `outcome`, `score`, `reason`, `attempt`, `attempts_left`, `finished`,
    `answer` and `grade` (the grader's details, e.g. `grade.extracted`), so graded hints are
    possible: `{% if grade.extracted %}You answered {{ grade.extracted }}.{% endif %}`."""


class DialogueSpec(ConfigModel):
    """A conversation that unfolds: later user turns are revealed one at a time, each as the
    output of the answer tool, until the last turn is answered."""

    column: str | None = None
    """A task field holding every user turn as a list of strings (e.g. MT-Bench's `turns`).
    The prompt presents the first (e.g. `template: "{{ turns[0] }}"`); the answer tool reveals
    the others in order."""
    turns: list[str] | None = Field(default=None, min_length=1)
    """Instead of `column`: the later user turns as Jinja templates over the task (and
    `replies`, the agent's replies so far)."""
    grade: Literal["each", "end"] = "end"
    """`each`: every reply is graded by `grader` (which sees `turn`, `user_turns` and
    `replies`); `end`: only the last reply is, with the whole dialogue in those fields. A reply's
    own reward is in its output's metadata (`turn_reward`); the output's `reward` stays null
    until the last reply, which carries the episode's reward (so a harness that keeps the last
    reward and one that sums them agree)."""
    reward: Literal["last", "mean", "min", "grader"] = "last"
    """The episode's reward: the `last` graded reply's, the `mean` or `min` over the replies
    (with `grade: each`), or the score of `transcript_grader` over the whole dialogue."""
    transcript_grader: GraderField | None = None
    """With `reward: grader`: grades the transcript (`User: ...` / `Assistant: ...`) as the
    answer, after the last reply."""

    @model_validator(mode="after")
    def _consistent(self) -> DialogueSpec:
        if (self.column is None) == (self.turns is None):
            raise ValueError("give exactly one of `column` or `turns`")
        if self.reward in ("mean", "min") and self.grade != "each":
            raise ValueError(f"`reward: {self.reward}` needs `grade: each` (one score per reply)")
        if (self.reward == "grader") != (self.transcript_grader is not None):
            raise ValueError("`reward: grader` and `transcript_grader` go together")
        return self


class StateSpec(ConfigModel):
    """A per-episode JSON document the tools read and change (a shop's database, a file
    system): copied per session, kept in the session as its changes, never shown to the agent
    except through tools. Give `file`, `field` or both."""

    file: str | None = None
    """A JSON file beside the spec holding the initial document (one object; its top-level
    objects are collections of items by key, e.g. `{users: {...}, orders: {...}}`)."""
    field: str | None = None
    """A task field holding the task's own initial state: a JSON merge patch applied to
    `file` (objects merge key by key, `null` removes), or the whole document without `file`."""

    @model_validator(mode="after")
    def _something(self) -> StateSpec:
        if self.file is None and self.field is None:
            raise ValueError("give `file`, `field` or both")
        return self


class UserSpec(ConfigModel):
    """A simulated user: an OpenAI-compatible model plays the user from a scenario. The agent
    talks to it through the answer tool (name it `send_message`, with `answer_field: message`):
    each call's output is the user's reply, and the reply that ends the conversation (it holds
    `stop`, or `max_turns` is reached) finishes the episode with its reward."""

    base_url: str
    """The API root, ending before `/chat/completions`, e.g. `https://api.openai.com/v1`."""
    model: str
    """The user model's name at that endpoint."""
    template: str | None = None
    """The user's instructions (its system message), a Jinja template over the task, e.g. a
    persona and `{{ reason_for_call }}`. It is also told how to end the conversation."""
    template_file: str | None = None
    """The same from a file beside the spec (or shipped in `templates/`)."""
    stop: str = "###STOP###"
    """The marker the user writes when the conversation is over (removed from what the agent
    reads)."""
    max_turns: int = Field(default=30, ge=1, le=200)
    """Agent messages after which the conversation ends whatever the user says."""
    api_key_secret: str | None = "OPENAI_API_KEY"
    """The name of the session secret holding the API key (sent by the client)."""
    api_key_env: str | None = None
    """An environment variable of the server holding the API key, used when the session has
    no such secret."""
    temperature: float = Field(default=0.0, ge=0, le=2)
    """Sampling temperature."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Cap on a reply's length (omitted from the request when unset)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """More request fields for the endpoint."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds to wait for one reply."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """Retries after a 429, a 5xx, a timeout, a dropped connection or a reply that is not a
    turn (empty)."""
    backoff: float = Field(default=0.5, ge=0)
    """Seconds before the first retry; doubled each time (with jitter)."""
    cache: bool = True
    """Keep valid replies in the on-disk cache (`$ENVBUILDER_CACHE_DIR`), keyed by the whole
    request (endpoint, model, sampling, the rendered instructions and the conversation, the
    user's tools): the same conversation gets the same reply, a changed one never an old reply.
    An invalid reply is never cached. `--no-cache` turns it off for a run."""
    tools: list[ToolField] = Field(default_factory=list)
    """The user's own tools (dual control): tools of any `type:` over the same `state:` as the
    agent's, which only the user model may call (through tool calls in its chat completions).
    They are never offered to the agent nor listed by `/tools`; graders see their calls
    (marked `by: user`), so a task can need the agent to tell the user what to do."""
    max_tool_rounds: int = Field(default=4, ge=1, le=20)
    """Rounds of tool calls the user may make before one reply; the request after the last
    round asks for text only (`tool_choice: none`)."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return api_root(value)

    @model_validator(mode="after")
    def _one_template(self) -> UserSpec:
        if (self.template is None) == (self.template_file is None):
            raise ValueError("give exactly one of `template` or `template_file`")
        if not self.stop.strip():
            raise ValueError("`stop` must not be blank")
        return self


class GraderTest(ConfigModel):
    """A response and the reward the grader must give it (run by `envbuilder check`)."""

    response: str
    """What the agent submits, e.g. `The answer is 72.`"""
    reward: float | None
    """The reward it must get; `null` when it must be ungradeable (no reward at all)."""
    reason: str | None = None
    """Text the grade's reason must contain, e.g. `timeout` (default: not checked)."""
    split: str | None = None
    """The split of the task it answers (default: the first split)."""
    index: int = 0
    """The index of the task in that split."""


class LimitsSpec(ConfigModel):
    """Budgets of the work one request may do. The defaults are far above what an honest spec
    needs; raise them only for a template that really builds a lot."""

    render_seconds: float | None = Field(default=None, gt=0, le=60)
    """Seconds one render of a template with loops, macros or includes may take (default 2);
    a render past it is stopped and that request fails with a clear error."""
    render_chars: int | None = Field(default=None, gt=0, le=200_000_000)
    """Characters one render may build in all: output, joins, repetitions (default 16,000,000)."""


class Spec(ConfigModel):
    """An envbuilder environment: a dataset, its splits, a prompt, a submit tool and a grader."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, frozen=True, title="envbuilder spec"
    )

    name: str = Field(pattern=ENV_NAME_PATTERN)
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
    tools: list[ToolField] = Field(default_factory=list)
    """Tools beside the answer tool; `type:` names the kind (`template`, `retrieve`,
    `calculator`, or one a plugin package adds)."""
    dialogue: DialogueSpec | None = None
    """Later user turns revealed one at a time by the answer tool (a multi-turn dialogue)."""
    state: StateSpec | None = None
    """A per-episode JSON document the tools read and change; graders such as `state_match`
    compare it with the state the task's gold actions lead to."""
    user: UserSpec | None = None
    """A simulated user the agent talks to through the answer tool (see `UserSpec`)."""
    sandbox: ContainerSpec | None = None
    """A container that lives for the session on a Docker or Podman engine: the `bash`,
    `python`, `read_file`, `write_file` and `edit_file` tools run in it, and repository graders
    run the tests in a fresh one of its image (see docs/how-to/containers.md)."""
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    """Budgets of a render: time and size (the defaults suit every honest spec)."""
    extends: str | None = None
    """A spec this one extends, relative to this file: its keys are the defaults, mappings merge
    key by key, and any other value set here replaces the base's. Relative paths inherited from
    the base (data files, templates) resolve against this file's folder."""
    tests: list[GraderTest] = Field(default_factory=list)
    """Responses with the reward each must get, checked by `envbuilder check`."""
    gold_actions: str | None = None
    """The task field holding each task's gold tool calls, a list (or JSON text) of
    `{name, arguments}`: `envbuilder check` makes them on a fresh episode before it submits the
    gold answer (an agent environment's gold is a trajectory, not only an answer)."""
    gold: str | None = None
    """Jinja template over the task giving a correct answer as an agent would submit it, e.g.
    `{{ solution }}` or `{{ answer }}`: what `envbuilder check` submits as each task's gold
    answer. Without it, check submits the grader's own target, which can only show that the
    target survives its own extraction (a circular check)."""
    inaction: str | None = None
    """Jinja template over the task that renders `true` on tasks where doing nothing is the
    right answer (a request the policy refuses: the gold actions change nothing), e.g.
    `{{ actions in ('[]', '') }}`. `envbuilder check --hacks` reports hostile answers that earn
    reward on those tasks apart from the hacks (doing nothing is what they do), so a clean
    audit passes and says why."""
