"""A browser of many runs: ``envbuilder view DIR`` writes ``DIR/index.html`` listing every run
under DIR (model, environment, spec hash, score, date), each run's own page beside its results
file, and the paired comparison of every two runs of one environment.

The page is static (no network, data autoescaped, like the run page): filtering, sorting and
picking two runs happen in the browser and are kept in the URL's fragment (``#q=…&sort=…&
compare=A,B``), so a view can be shared as a link. Comparisons are computed here, by the same
code as ``eval compare``, never re-implemented in JavaScript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envbuilder.errors import EnvbuilderError
from envbuilder.eval._compare import compare_records
from envbuilder.eval._records import RunFileError, RunHeader
from envbuilder.eval._report import _html, write_report
from envbuilder.eval._results import Summary, summarize, unscored
from envbuilder.eval._run import ResultsFile, describe_sampling, episode_key
from envbuilder.paths import write_file

__all__ = ["find_runs", "write_browser"]

#: Comparisons are precomputed for at most this many runs of one environment (n² pairs).
MAX_PAIRED = 60


def find_runs(folder: Path) -> list[Path]:
    """Every results file under ``folder`` (a ``.jsonl`` whose first line is a run header).

    Raises:
        RunFileError: a file's first line names a run but is not a valid run header.
    """
    found = []
    for path in sorted(folder.rglob("*.jsonl")):
        try:
            ResultsFile(path).header()
        except RunFileError:
            raise
        except EnvbuilderError:
            continue  # not a results file (another JSONL file in the folder)
        found.append(path)
    return found


def _row(path: Path, folder: Path, header: RunHeader, records: list[dict[str, Any]]) -> dict[str, Any]:
    run = header.run
    file = ResultsFile(path)
    s = summarize(records, group_by=None)
    page, _ = write_report(path, group_by=file.recorded_group_by(), inside=folder)
    return {
        "id": header.run_id,
        "model": run.model,
        "env": run.env,
        "split": run.split,
        "env_hash": run.env_hash,
        "answer": run.answer,
        "samples": run.samples,
        "sampling": describe_sampling(run.sampling),
        "episodes": s.episodes,
        "tasks": s.tasks,
        **_score(s),
        "accuracy_text": s.accuracy.format(percent=True),
        "errors": s.errors,
        "date": (header.started or "")[:19].replace("T", " "),
        "page": page.relative_to(folder).as_posix(),
        "results": path.relative_to(folder).as_posix(),
        "regraded_from": header.regraded_from,
    }


def _score(s: Summary) -> dict[str, Any]:
    """The run's score, or none when no episode got a reward: a run whose episodes were all
    void, ungradeable or failed is void, not a model that scored 0.000."""
    why = unscored(s.outcomes)
    if why is not None:
        return {"score": None, "score_text": why}
    return {"score": s.reward_all.mean, "score_text": s.reward_all.format()}


def write_browser(folder: Path) -> tuple[Path, int]:
    """Write ``folder/index.html`` (and each run's page); the index and the number of runs.

    Raises:
        EnvbuilderError: ``folder`` holds no run.
    """
    paths = find_runs(folder)
    if not paths:
        raise EnvbuilderError(
            f"{folder} holds no results file of `envbuilder eval`", hint="Run `envbuilder eval … --out` first"
        )
    loaded = []
    for path in paths:
        header, records = ResultsFile(path).read(light=True)  # no transcripts: little memory
        assert header is not None  # find_runs kept only files with a run header
        loaded.append((path, header, sorted(records.values(), key=episode_key)))
    rows = [_row(path, folder, header, records) for path, header, records in loaded]
    comparisons: dict[str, dict[str, Any]] = {}
    by_env: dict[str, list[int]] = {}
    for i, (_, header, _) in enumerate(loaded):
        by_env.setdefault(header.run.env, []).append(i)
    for members in by_env.values():
        for i in members[:MAX_PAIRED]:
            for j in members[:MAX_PAIRED]:
                if i == j:
                    continue
                a, b = loaded[i], loaded[j]
                try:
                    c = compare_records((a[1], a[2], a[0].name), (b[1], b[2], b[0].name))
                except EnvbuilderError as exc:
                    comparisons[f"{rows[i]['id']},{rows[j]['id']}"] = {"error": str(exc)}
                    continue
                comparisons[f"{rows[i]['id']},{rows[j]['id']}"] = {
                    **c.overall.to_dict(),
                    "text": c.overall.diff.format(),
                    "left_out": c.left_out(),
                    "notes": c.notes,
                }
    page = (
        _html()
        .get_template("eval/browser.html.jinja")
        .render(folder=folder.name or str(folder), rows=rows, data=_script_json({"comparisons": comparisons}))
    )
    return write_file(folder / "index.html", page, inside=folder), len(rows)


def _script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">`` (no ``</script>`` from run data)."""
    return json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
