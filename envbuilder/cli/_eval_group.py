"""``envbuilder eval``: run an eval (the default: ``eval SPEC_OR_URL``), or ``eval compare A B``."""

from __future__ import annotations

from typing import Any

import typer

from envbuilder.cli import _compare, _eval, _regrade
from envbuilder.cli._help import Command, Group


class _RunByDefault(Group):
    """``eval SPEC …`` means ``eval run SPEC …``: anything that is not a subcommand's name runs."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        if args and args[0] in self.commands:
            return super().resolve_command(ctx, args)
        return "run", self.commands["run"], args


eval_app = typer.Typer(
    cls=_RunByDefault,
    no_args_is_help=True,
    context_settings={"ignore_unknown_options": True},
    help=(
        "Evaluate a model on environments (`eval SPEC_OR_URL …`); compare two runs (`eval compare A B`); "
        "re-grade a run (`eval regrade RUN --spec NEW`)."
    ),
)
eval_app.command("run", cls=Command)(_eval.eval_command)
eval_app.command("compare", cls=Command)(_compare.compare)
eval_app.command("regrade", cls=Command)(_regrade.regrade)
