"""Run by a Python with the real ``harbor`` package (it needs 3.12; see
tests/integrations/test_harbor_export.py): reads each task directory given with Harbor's own
loader (``harbor.models.task.task.Task``, which validates task.toml and the layout) and prints
one JSON line per task: its name, instruction, config and the scripts Harbor would run."""

import json
import sys
import warnings
from pathlib import Path

from harbor.models.task.task import Task


def main() -> None:
    warnings.simplefilter("error")  # a deprecated field in an export is a failure
    for folder in sys.argv[1:]:
        task = Task(Path(folder))
        print(
            json.dumps(
                {
                    "folder": folder,
                    "name": task.name,
                    "valid": Task.is_valid_dir(Path(folder)),
                    "instruction": task.instruction,
                    "config": task.config.model_dump(mode="json"),
                    "test": str(task.paths.discovered_test_path.relative_to(task.paths.task_dir)),
                    "solve": str(task.paths.discovered_solve_path.relative_to(task.paths.task_dir)),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
