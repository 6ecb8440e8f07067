"""The bank's domain logic for the agent tests (a `function` tool module beside the spec)."""

from __future__ import annotations

from typing import Any

from envbuilder.errors import ToolError


def transfer(db: Any, source: str, target: str, amount: float, memo: str = "") -> dict[str, Any]:
    """Move money between two accounts.

    Args:
        source: The account the money leaves.
        target: The account the money goes to.
        amount: How much to move; more than zero.
        memo: A note kept in both accounts' logs.
    """
    accounts = db["accounts"]
    if source not in accounts or target not in accounts:
        raise ToolError("Account not found")
    if amount <= 0:
        raise ValueError("The amount must be positive")
    src, dst = accounts[source], accounts[target]
    if src["frozen"] or dst["frozen"]:
        raise ToolError("A frozen account cannot move money")
    src["balance"] -= amount
    dst["balance"] += amount
    src["log"].append(f"-{amount} {memo}".strip())
    dst["log"].append(f"+{amount} {memo}".strip())
    if src["balance"] < 0:
        raise ToolError("Insufficient funds")  # raised after changes: none of them may stay
    return {"source": src["balance"], "target": dst["balance"]}


def total(db: Any) -> str:
    """The sum of every balance."""
    return str(sum(db["accounts"].peek(k)["balance"] for k in db["accounts"]))


def tags(db: Any, labels: list[str], limit: int | None = None) -> list[str]:
    """Echo labels.

    Args:
        labels: Some labels,
            described over two lines.
    """
    return labels[:limit]
