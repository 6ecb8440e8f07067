"""What tokens cost: list prices per model (USD per million tokens), for eval's ``--max-cost`` budget.

Prices change; the table holds published list prices as of its date for a few common models, and
``--price IN,OUT`` overrides it (or prices a model it lacks). A budget with an unpriced model is
an error, never an unbounded run.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuilder.errors import EnvbuilderError

__all__ = ["PRICES", "PRICES_AS_OF", "Price", "price_of"]

PRICES_AS_OF = "2025-06"


@dataclass(frozen=True)
class Price:
    """USD per million prompt (input) and completion (output) tokens."""

    prompt: float
    completion: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


#: Published list prices (USD per 1M tokens, input / output), matched by model-name prefix.
PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "o3-mini": Price(1.10, 4.40),
    "o3": Price(2.00, 8.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-opus-4": Price(15.00, 75.00),
}


def price_of(model: str, override: str | None = None) -> Price | None:
    """The price of ``model``: ``override`` (``"IN,OUT"``) if given, else the longest prefix of
    the table that names it, else None.

    Raises:
        EnvbuilderError: ``override`` is not two non-negative numbers.
    """
    if override is not None:
        try:
            prompt, completion = (float(x) for x in override.split(","))
        except ValueError:
            raise EnvbuilderError(
                f"--price {override!r}: expected IN,OUT (USD per million tokens), e.g. 0.15,0.60"
            ) from None
        if prompt < 0 or completion < 0:
            raise EnvbuilderError(f"--price {override!r}: prices cannot be negative")
        return Price(prompt, completion)
    name = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o" on a router
    matches = [k for k in PRICES if name.startswith(k)]
    return PRICES[max(matches, key=len)] if matches else None
