"""ChatModel (llm/_model.py): an endpoint URL that is not one fails at once; a timeout is retried once."""

from __future__ import annotations

import pytest

from envbuilder.llm import DEFAULT_RETRY, ChatModel, ModelError
from tests.fakes.chat_server import HungServer


@pytest.mark.parametrize("base_url", ["notaurl", "http://", "ftp://example.com/v1"])
async def test_an_endpoint_url_that_is_not_one_fails_at_once(base_url: str) -> None:
    model = ChatModel(base_url, "m")
    try:
        with pytest.raises(ModelError) as caught:
            await model.complete([{"role": "user", "content": "hi"}], [])
    finally:
        await model.aclose()
    assert caught.value.reason == "invalid URL" and not caught.value.gave_up
    assert str(caught.value).startswith("the model endpoint's URL is not an http(s) URL with a host: ")
    assert (model.usage.calls, model.usage.retries) == (1, 0)


async def test_a_timed_out_request_is_retried_once_with_the_timeout_named() -> None:
    """Two tries of the timeout against a hung endpoint, not 1 + max_retries (half an hour at
    the default 300 s and 5 retries)."""
    with HungServer() as server:
        model = ChatModel(server.base_url, "m", timeout=0.3)
        try:
            with pytest.raises(ModelError) as caught:
                await model.complete([{"role": "user", "content": "hi"}], [])
        finally:
            await model.aclose()
        assert server.connections == 2
    assert caught.value.reason == "timeout (ReadTimeout)" and caught.value.gave_up
    assert str(caught.value) == (
        "the model endpoint gave no answer within 0.3 s (ReadTimeout) (gave up after 2 tries)"
    )
    assert (model.usage.calls, model.usage.retries) == (2, 1)
    assert (DEFAULT_RETRY.max_retries, DEFAULT_RETRY.max_timeout_retries) == (5, 1)
