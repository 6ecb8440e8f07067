"""``envbuilder view RUN``: write a run's results as one self-contained HTML page and say where."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envbuilder.cli._output import fail_on_errors


def view(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="A results file of `envbuilder eval --out`.")],
    out: Annotated[Path | None, typer.Option(help="The HTML file (default: RUN with .html).")] = None,
    group_by: Annotated[str | None, typer.Option(help="Also score per value of this task field.")] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in a browser.")] = False,
) -> None:
    """Render RUN's summary, groups and every transcript (filterable, searchable) as a static page."""
    from envbuilder.eval._report import write_report

    with fail_on_errors():
        page, summary = write_report(run, out, group_by=group_by)
    typer.echo(f"envbuilder: {summary.episodes} episodes in {page}")
    if open_browser:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())
