"""The ``calculator`` tool: arithmetic on numbers, parsed to a syntax tree and walked (no eval).

Only number literals, ``+ - * / // % **``, parentheses, unary signs and a few functions are
accepted; everything else (names, attributes, calls of anything else, comprehensions) is an
error output. Work is bounded: the expression's length, the size of every intermediate
integer (``**`` with a huge exponent is refused before it is computed) and the nesting depth.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field

from envbuilder.errors import ToolError
from envbuilder.spec import ParamSpec
from envbuilder.tools._base import Tool, ToolCall, ToolConfig, ToolReply

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "exp": math.exp,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_BITS = 4096
"""The largest integer (in bits) any step may produce (`2**4096` is about 1e1233)."""
MAX_DEPTH = 50
MAX_CHARS = 10_000
"""The longest expression parsed (Python's parser takes seconds on a 1 MB `1+1+…`)."""


class CalculatorConfig(ToolConfig):
    """Safe arithmetic: `+ - * / // % **`, parentheses, `abs round min max sqrt floor ceil log
    exp`, `pi` and `e`."""

    type: Literal["calculator"]
    precision: int = Field(default=12, ge=1, le=17)
    """Significant digits of non-integer results."""


class CalculatorTool(Tool):
    Config = CalculatorConfig
    description = (
        "Evaluate an arithmetic expression, e.g. `(48 / 2) * 3 + 1`. Supports + - * / // % **, "
        "parentheses, abs, round, min, max, sqrt, floor, ceil, log, exp, pi and e."
    )
    default_input: ClassVar[dict[str, ParamSpec]] = {
        "expression": ParamSpec(description="The arithmetic expression to evaluate.", max_length=500)
    }
    reads_input = frozenset({"expression"})

    async def run(self, call: ToolCall) -> ToolReply:
        expression = str(call.args["expression"])
        value = evaluate(expression)
        return ToolReply.text(format_number(value, self.config.precision))


def evaluate(expression: str) -> Number:
    """The value of ``expression``; ToolError (saying what is wrong) when it is not arithmetic."""
    expression = expression.strip()
    if len(expression) > MAX_CHARS:
        # Python's parser takes seconds (holding the interpreter) on a long chain like `1+1+…`.
        raise ToolError(f"the expression is longer than {MAX_CHARS:,} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None
    except (MemoryError, RecursionError):  # the parser's own nesting limits
        raise ToolError("the expression is nested too deeply") from None
    try:
        value = _eval(tree.body, 0)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except (ValueError, TypeError) as exc:
        raise ToolError(f"cannot compute {expression!r}: {exc}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return value


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise ToolError("the expression is nested too deeply")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, depth + 1))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        if isinstance(node.op, ast.Mult | ast.Mod | ast.FloorDiv) and isinstance(left, int):
            _bounded(left)
        return _bounded(_BINARY[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
        and 0 < len(node.args) <= 10
    ):
        args = [_eval(a, depth + 1) for a in node.args]
        return _bounded(_FUNCTIONS[node.func.id](*args))
    raise ToolError(f"{_describe(node)} is not allowed in a calculator expression")


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > 10_000:
        raise ToolError("the exponent is too large")
    whole = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if whole and max(int(base).bit_length(), 1) * exponent > MAX_BITS:
        raise ToolError("the result is too large")


def _bounded(value: Any) -> Number:
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise ToolError("the result is too large")
    return value


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return f"calling {node.func.id!r} that way"
    if isinstance(node, ast.Constant):
        return f"the literal {node.value!r}"
    return f"a {type(node).__name__} expression"


def format_number(value: Number, precision: int) -> str:
    """``72`` for integers and integral floats, else ``precision`` significant digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.{precision}g}"
    return str(value)
