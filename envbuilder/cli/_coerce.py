"""typer's conversion of a command-line value, without a pydantic TypeAdapter for the plain cases.

typer (0.25 and later) converts each parameter's value with a pydantic ``TypeAdapter`` it builds
for the parameter on first use: `envbuilder serve` has 40 options, and building their adapters
(and importing ``typer._adapters``) was about a tenth of its start-up, to turn ``"8080"`` into
8080 or to pass ``None`` and ``"127.0.0.1"`` through. :class:`PlainParam` gives the same result
for the values whose result is certain — ``None``, a `str`, a default already of its type, a
plain decimal numeral in range, lists of those — and hands every other value (a path, a value
out of range, ``" 12"``, ``"1e3"``, a choice) to the runtime parameter typer itself builds, on
first need. So a value typer would refuse still gets typer's own error, and a value it would
convert differently is never converted here. ``tests/cli/test_coerce.py`` compares both on
generated values.

A typer without these internals (before 0.25) keeps its own conversion: :func:`plain_params`
then changes nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

import typer.core

try:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
except ImportError:  # pragma: no cover - typer before 0.25 converts with click's types
    RuntimeParam = None  # type: ignore[assignment,misc]

_INT = re.compile(r"0|-?[1-9][0-9]{0,17}")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?")
_PLAIN = (str, int, float)


class _Undecided(Exception):
    """A value whose conversion is left to typer."""


def _leaf(annotation: Any, value: Any, low: Any, high: Any) -> Any:
    """``value`` converted to ``annotation`` (str, int or float), or _Undecided."""
    if annotation is str:
        if type(value) is str:
            return value
        raise _Undecided
    if annotation is int:
        if type(value) is int:
            number: Any = value
        elif type(value) is str and _INT.fullmatch(value):
            number = int(value)
        else:
            raise _Undecided
    elif type(value) is float and math.isfinite(value):
        number = value
    elif type(value) is str and _FLOAT.fullmatch(value):
        number = float(value)
    else:
        raise _Undecided
    if (low is not None and number < low) or (high is not None and number > high):
        raise _Undecided  # typer's own message says which bound
    return number


def _plain(descriptor: Any) -> tuple[Any, bool] | None:
    """(leaf annotation, is a list) when :class:`PlainParam` can convert for ``descriptor``."""
    info = descriptor.parameter_info
    if info.parser is not None or info.clamp or descriptor.file_annotation is not None:
        return None
    annotation, is_list = descriptor.annotation, False
    if get_origin(annotation) is list and len(get_args(annotation)) == 1:
        annotation, is_list = get_args(annotation)[0], True
    if descriptor.is_choice:
        return None
    return annotation, is_list  # a leaf other than str/int/float: only None and [] are decided


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class PlainParam(RuntimeParam):
        """typer's runtime parameter for ``descriptor``, converting plain values itself."""

        descriptor: TypeDescriptor
        is_list: bool
        leaf: Any
        _typer: list[Any] = field(default_factory=list, compare=False, repr=False)

        def typer_param(self) -> Any:
            """The runtime parameter typer builds for this parameter (built once, on need)."""
            if not self._typer:
                self._typer.append(build_runtime_param(self.descriptor))
            return self._typer[0]

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                return self._decide(value)
            except _Undecided:
                return self.typer_param()._coerce_value(value, param=param, ctx=ctx)

        def _decide(self, value: Any) -> Any:
            info = self.parameter_info
            if self.leaf not in _PLAIN:
                if self.is_list and type(value) in (list, tuple) and not value:
                    return []
                raise _Undecided
            if not self.is_list:
                return _leaf(self.leaf, value, info.min, info.max)
            if type(value) not in (list, tuple):
                raise _Undecided
            return [_leaf(self.leaf, item, info.min, info.max) for item in value]


def plain_params(params: list[Any]) -> None:
    """Give each typer parameter of a command :class:`PlainParam` as its runtime parameter."""
    if RuntimeParam is None:  # pragma: no cover
        return
    base = getattr(typer.core, "_TyperParameter", None)
    for param in params:
        if base is None or not isinstance(param, base) or param._runtime_param is not None:
            continue
        descriptor = param.type_descriptor
        plain = _plain(descriptor)
        if plain is not None:
            leaf, is_list = plain
            param._runtime_param = PlainParam(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
                is_list=is_list,
                leaf=leaf,
            )


__all__ = ["plain_params"]
