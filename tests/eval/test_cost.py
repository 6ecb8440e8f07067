"""The price table: the longest matching model-name prefix, overrides, refusals."""

from __future__ import annotations

import pytest

from envbuilder.errors import EnvbuilderError
from envbuilder.llm import PRICES, Price, price_of


def test_the_longest_prefix_names_the_model() -> None:
    assert price_of("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]  # not gpt-4o's price
    assert price_of("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert price_of("openai/gpt-4.1-mini") == PRICES["gpt-4.1-mini"]  # a router's provider/ prefix
    assert price_of("claude-3-5-haiku-20241022") == PRICES["claude-3-5-haiku"]
    assert price_of("my-local-llama") is None


def test_an_override_and_the_cost_of_tokens() -> None:
    price = price_of("anything", "0.15,0.60")
    assert price == Price(0.15, 0.60)
    assert price.cost(1_000_000, 500_000) == pytest.approx(0.45)


@pytest.mark.parametrize("bad", ["1", "a,b", "1,2,3", "-1,2"])
def test_a_bad_override_is_an_error(bad: str) -> None:
    with pytest.raises(EnvbuilderError, match="--price"):
        price_of("m", bad)
