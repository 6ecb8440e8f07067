"""Chat endpoints: the one client of every model call (the judge, the simulated user, eval).

``ChatModel`` speaks OpenAI chat completions, ``AnthropicModel`` the Messages API and
``ResponsesModel`` the OpenAI Responses API, each behind the chat-completions interface; every
request goes through one loop under the shared retry policy (:mod:`envbuilder.retry`) and counts
its ``Usage``. ``ReplyCache`` keeps replies on disk by a hash of the request; ``override_endpoints``
applies the endpoint overrides of the environment (``ENVBUILDER_USER_MODEL`` …); ``price_of`` turns
tokens into money (the ``--max-cost`` budget itself is eval's). This package sits above ``data``
and ``templating`` and below graders, tools, the episode and eval, and imports none of them;
httpx is imported only when a model is built.
"""

from envbuilder.llm._apis import APIS, AnthropicModel, ResponsesModel, model_class
from envbuilder.llm._body import chat_body, reply_text, resolve_api_key
from envbuilder.llm._cache import ReplyCache, cache_key, open_cache
from envbuilder.llm._cost import PRICES, PRICES_AS_OF, Price, price_of
from envbuilder.llm._endpoints import ENDPOINT_VARIABLES, EndpointUse, endpoint_variable, override_endpoints
from envbuilder.llm._model import DEFAULT_RETRY, ChatModel, Describe, ModelError, Sampling, Usage

__all__ = [
    "APIS",
    "DEFAULT_RETRY",
    "ENDPOINT_VARIABLES",
    "PRICES",
    "PRICES_AS_OF",
    "AnthropicModel",
    "ChatModel",
    "Describe",
    "EndpointUse",
    "ModelError",
    "Price",
    "ReplyCache",
    "ResponsesModel",
    "Sampling",
    "Usage",
    "cache_key",
    "chat_body",
    "endpoint_variable",
    "model_class",
    "open_cache",
    "override_endpoints",
    "price_of",
    "reply_text",
    "resolve_api_key",
]
