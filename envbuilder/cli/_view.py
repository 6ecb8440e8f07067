"""``envbuilder view RUN|DIR``: a run's page, or a browser of every run under a folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from envbuilder.cli._output import fail_on_errors


def view(
    run: Annotated[
        Path,
        typer.Argument(
            metavar="RUN|DIR", help="A results file of `envbuilder eval --out`, or a folder of them."
        ),
    ],
    out: Annotated[
        Path | None, typer.Option(help="The HTML file of a run (default: RUN with .html).")
    ] = None,
    group_by: Annotated[
        str | None, typer.Option(help="Score per value of this task field (default: the run's own).")
    ] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in a browser.")] = False,
    serve: Annotated[
        bool,
        typer.Option("--serve", help="Serve the pages on a local port until Ctrl-C (a folder's browser)."),
    ] = False,
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port of --serve (0: a free one).")] = 0,
) -> None:
    """Render a run (summary, groups, every transcript) or, for DIR, a browser of all its runs."""
    from envbuilder.eval._browser import write_browser
    from envbuilder.eval._report import write_report

    with fail_on_errors():
        if run.is_dir():
            page, n = write_browser(run)
            typer.echo(f"envbuilder: {n} run(s) in {page}")
        else:
            page, summary = write_report(run, out, group_by=group_by)
            typer.echo(f"envbuilder: {summary.episodes} episodes in {page}")
    if serve:
        _serve(page, port, open_browser)
    elif open_browser:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())


def _serve(page: Path, port: int, open_browser: bool) -> None:
    """Serve the page's folder on 127.0.0.1 (pages only: nothing else is written or run)."""
    import functools
    import http.server  # here, not at the top: `envbuilder --help` builds every command

    class _Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # one line per request is noise
            return None

        def send_head(self) -> Any:
            """404 for anything outside the served folder once links are followed: a runs folder
            from elsewhere may hold a link to the user's files."""
            root = os.path.realpath(self.directory)
            if os.path.commonpath([root, os.path.realpath(self.translate_path(self.path))]) != root:
                self.send_error(404, "Not inside the served folder")
                return None
            return super().send_head()

    handler = functools.partial(_Quiet, directory=str(page.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/{page.name}"
        typer.echo(f"envbuilder: serving {url} (Ctrl-C to stop)", err=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            typer.echo("envbuilder: stopped", err=True)
