"""Build an environment from a spec written inline (dataset and splits vary, the rest is fixed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from envbuilder.environment import Environment
from envbuilder.spec import parse_spec


def make_env(
    dataset: dict,
    splits: dict,
    base_dir: Path,
    *,
    task: dict | None = None,
    template: str = "{{ question }}",
    target: str = "{{ answer }}",
) -> Environment:
    text = yaml.safe_dump(
        {
            "name": "t",
            "dataset": dataset,
            "splits": splits,
            **({"task": task} if task else {}),
            "prompt": {"template": template},
            "grader": {"type": "exact_match", "target": target},
        },
        sort_keys=False,
    )
    return Environment(parse_spec(text, file="spec.yaml", base_dir=base_dir))
