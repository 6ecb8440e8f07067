"""``type: reasoning_gym``: tasks from the procedural families of the `reasoning-gym` package.

Row ``i`` of a source split (a difficulty level) is made in O(1) from the split's seed and ``i``:
a seeded hash of ``i`` picks the family by weight, and the row is item ``i mod CHUNK`` of the
family's dataset seeded by ``(split seed, family, i div CHUNK)``. reasoning-gym datasets are
index-addressable (``dataset[k]`` seeds its own RNG with ``seed + k``), but a few precompute
``size`` items when built, so items are addressed ``CHUNK`` at a time; a family's dataset is
built once per config and reseeded per chunk (:func:`family_dataset`). The grader finds the same
item from the row's ``rg`` coordinates to score an answer with the family's own ``score_answer``.

The package (Apache-2.0) and its families are imported on the first open, not at start-up.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
from typing import Any, Literal

from pydantic import Field, model_validator

from envbuilder.data._base import Row, Table
from envbuilder.data._convert import to_json
from envbuilder.data._generated import GeneratedTable, LevelsConfig, _Generated, derive_seed
from envbuilder.errors import DataError, did_you_mean
from envbuilder.plugins import ConfigModel

__all__ = [
    "CHUNK",
    "ReasoningGymConfig",
    "ReasoningGymSource",
    "declared",
    "families",
    "family_dataset",
    "rg_entry",
]

#: Items per built dataset (reasoning-gym's own default size).
CHUNK = 500
#: The columns of every row.
COLUMNS = ["question", "answer", "family", "difficulty", "rg"]


class FamilySpec(ConfigModel):
    """One reasoning-gym task family."""

    weight: float = Field(default=1.0, gt=0)
    """Its share of the rows (relative to the other families' weights)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The family's config (its difficulty knobs, e.g. `{min_terms: 2, max_terms: 4}`)."""


class ReasoningGymConfig(LevelsConfig):
    """Procedural reasoning tasks from the `reasoning-gym` package (a core dependency):
    one or several families, each with its config and weight, at one or several difficulty
    levels."""

    type: Literal["reasoning_gym"]
    tasks: dict[str, FamilySpec] = Field(min_length=1)
    """Family name (e.g. `chain_sum`, `basic_arithmetic`, `word_sorting`) → its weight and config."""

    @model_validator(mode="after")
    def _levels_name_families(self) -> ReasoningGymConfig:
        for level, overrides in self.levels.items():
            for family, value in overrides.items():
                if family not in self.tasks:
                    hint = did_you_mean(family, self.tasks) or f"The families are: {', '.join(self.tasks)}"
                    raise ValueError(f"level {level!r} names family {family!r}, which `tasks` lacks. {hint}")
                if not isinstance(value, dict):
                    raise ValueError(
                        f"level {level!r}: family {family!r} takes a mapping of config keys, "
                        f"not {type(value).__name__}"
                    )
        return self


def families() -> list[str]:
    """Every family name reasoning-gym registers."""
    return sorted(_registry())


def _registry() -> dict[str, Any]:
    return _factory().DATASETS


def _factory() -> Any:
    """reasoning-gym's registry module, its families registered (imported on first use)."""
    try:
        import reasoning_gym  # noqa: F401 - registers every family
        from reasoning_gym import factory
    except ImportError:
        raise DataError(
            "the `reasoning_gym` source needs the reasoning-gym package",
            hint="pip install 'reasoning-gym>=0.1.25' (envbuilder depends on it)",
            code="missing_dependency",
        ) from None
    return factory


@functools.lru_cache(maxsize=64)
def _built(family: str, config_json: str) -> Any:
    return _factory().create_dataset(family, **json.loads(config_json), seed=0, size=CHUNK)


@functools.lru_cache(maxsize=4096)
def _dataset(family: str, config_json: str, seed: int) -> Any:
    # Building a dataset can be slow (word lists, tables): build each config once and reseed
    # a shallow copy per chunk (items are seeded by `seed + index`, from the dataset or its config).
    dataset = copy.copy(_built(family, config_json))
    dataset.seed = seed
    if hasattr(dataset.config, "seed"):
        dataset.config = copy.copy(dataset.config)
        dataset.config.seed = seed
    return dataset


def family_dataset(family: str, config: dict[str, Any], seed: int) -> Any:
    """The family's dataset of ``CHUNK`` items under ``config``, seeded by ``seed``."""
    _registry()
    return _dataset(family, json.dumps(config, sort_keys=True), seed)


_declared: set[tuple[str, str]] = set()


def declared(family: Any, config: Any) -> bool:
    """Whether a spec loaded in this process declares ``config`` for ``family`` (the grader
    builds only those in a worker's zygote, never a config a client's task brings)."""
    try:
        return (str(family), json.dumps(config, sort_keys=True)) in _declared
    except (TypeError, ValueError):
        return False


def rg_entry(coordinates: dict[str, Any]) -> dict[str, Any]:
    """The reasoning-gym entry (question, answer, metadata) a row's ``rg`` field points at."""
    ds = family_dataset(coordinates["family"], coordinates["config"], int(coordinates["seed"]))
    return ds[int(coordinates["index"])]


class ReasoningGymSource(_Generated):
    Config = ReasoningGymConfig
    config: ReasoningGymConfig

    def open(self, split: str) -> Table:
        level, overrides = self.level_config(split)
        names = list(self.config.tasks)
        configs = {f: {**spec.config, **overrides.get(f, {})} for f, spec in self.config.tasks.items()}
        self._check(split, configs)
        _declared.update((f, json.dumps(to_json(c), sort_keys=True)) for f, c in configs.items())
        total = sum(s.weight for s in self.config.tasks.values())
        bounds, acc = [], 0.0
        for spec in self.config.tasks.values():
            acc += spec.weight / total
            bounds.append(acc)
        split_seed = self.split_seed(split)

        def make(index: int) -> Row:
            u = derive_seed(split_seed, "family", index) / 2**63
            family = names[min(bisect.bisect_right(bounds, u), len(names) - 1)]
            chunk, offset = divmod(index, CHUNK)
            coordinates = {
                "family": family,
                "config": configs[family],
                "seed": derive_seed(split_seed, family, chunk) % 2**32,
                "index": offset,
            }
            try:
                entry = rg_entry(coordinates)
            except Exception as exc:  # the package's code: a failure is this row's data error
                raise DataError(
                    f"reasoning-gym family {family!r} failed on row {index} of {split!r}: "
                    f"{type(exc).__name__}: {exc}",
                    hint="Check the family's config",
                    code="generator_failed",
                ) from None
            answer = entry.get("answer")
            return {
                "question": str(entry["question"]),
                "answer": None if answer is None else str(answer),
                "family": family,
                "rg": to_json(coordinates),
            }

        return GeneratedTable(make, self.config.num_tasks, level, COLUMNS)

    def _check(self, split: str, configs: dict[str, dict[str, Any]]) -> None:
        """Every family exists and accepts its config (at load time, not on the first task)."""
        known = _registry()
        for family, config in configs.items():
            if family not in known:
                raise DataError(
                    f"reasoning-gym has no task family {family!r}",
                    hint=did_you_mean(family, known) or "See reasoning_gym.factory.DATASETS for the names",
                    code="unknown_family",
                )
            try:
                family_dataset(family, config, 0)
            except Exception as exc:  # the family's config class and its validate()
                raise DataError(
                    f"reasoning-gym family {family!r} refuses its config at level {split!r}: "
                    f"{type(exc).__name__}: {exc}",
                    hint="Use the keys of the family's config dataclass",
                    code="family_config",
                ) from None
