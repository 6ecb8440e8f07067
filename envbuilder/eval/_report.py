"""A run as one self-contained HTML page: its identity, summary, groups and every transcript.

Like the catalog site, the page needs no network (CSS and JS inlined) and everything from the
run (model text, tool output, task fields) is data, autoescaped. Filtering by outcome and the
search run in the browser.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jinja2

from envbuilder.eval._results import Summary, interval_methods, outcome_of, summarize
from envbuilder.eval._run import ResultsFile, describe_sampling
from envbuilder.paths import relative_url, write_file
from envbuilder.templating import templates_dir

__all__ = ["write_report"]


@functools.cache
def _html() -> jinja2.Environment:
    # Not the sandboxed prompt factory: these templates are ours and the run's text is only data.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        autoescape=True,
        undefined=jinja2.ChainableUndefined,  # records of older runs may lack a field
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    env.filters["count"] = lambda n: f"{n:,}"
    env.filters["estimate"] = lambda e, percent=False: e.format(percent)
    env.filters["url"] = relative_url  # a link made from data stays a relative path
    return env


def write_report(
    results: Path, out: Path | None = None, *, group_by: str | None = None, inside: Path | None = None
) -> tuple[Path, Summary]:
    """Render the run in ``results`` to ``out`` (default: beside it, ``.html``); the path and summary.

    ``inside``: the folder the page must be written in without following a link (default: its
    own folder); see :func:`envbuilder.paths.write_file`.

    Raises:
        EnvbuilderError: ``results`` is not a run's results file, or ``out`` is a link
            (``unsafe_output``).
    """
    file = ResultsFile(results)
    header, records = file.load()
    if group_by is None:  # the grouping the run was scored with, unless another is asked for
        group_by = file.recorded_group_by()
    summary = summarize(records, group_by=group_by)
    run = header.run
    page = (
        _html()
        .get_template("eval/report.html.jinja")
        .render(
            header=header,
            run=run,
            sampling=describe_sampling(run.sampling),
            s=summary,
            methods=interval_methods(summary),
            group_by=group_by,
            episodes=[{"r": r, "outcome": outcome_of(r)} for r in records],
        )
    )
    out = out or results.with_suffix(".html")
    write_file(out, page, inside=inside)
    return out, summary
