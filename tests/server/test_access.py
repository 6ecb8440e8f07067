"""API keys: every place a key can be sent is checked, through both doors, with a wrong key
(refused), the right key (accepted) and no key (refused). A check that let a wrong key through
at any one place fails its own case here."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from envbuilder.environment import Environment
from envbuilder.server import ServerSettings, create_app

KEY = "k-access-0123456789abcdef"
WRONG = "k-wrong-0123456789abcdefg"
PREFIX = KEY[:-1] + "X"  # equal but for the last character


def _secrets(name: str, value: str, *, plain: bool = False) -> str:
    item: Any = value if plain else {"value": value, "allowed_domains": []}
    return base64.b64encode(json.dumps({name: item}).encode()).decode()


PLACES: dict[str, Any] = {
    "x-api-key": lambda k: {"X-API-Key": k},
    "bearer": lambda k: {"Authorization": f"Bearer {k}"},
    "bearer-lowercase": lambda k: {"Authorization": f"bearer {k}"},
    "x-secrets api_key": lambda k: {"X-Secrets": _secrets("api_key", k)},
    "x-secrets OPENREWARD_API_KEY": lambda k: {"X-Secrets": _secrets("OPENREWARD_API_KEY", k)},
    "x-secrets plain value": lambda k: {"X-Secrets": _secrets("api_key", k, plain=True)},
}
ROUTES = [
    ("GET", "/gsm8k/splits", None),
    ("POST", "/gsm8k/num_tasks", {"split": "test"}),
    ("POST", "/create_session", None),
    ("GET", "/list_environments", None),
]


@pytest.fixture(params=["fast", "fastapi"])
def app(request: pytest.FixtureRequest, gsm8k: Environment) -> Any:
    app = create_app([gsm8k], ServerSettings(api_keys=(KEY,)))
    app.front.fast = request.param == "fast"
    return app


async def _status(app: Any, headers: dict[str, str]) -> list[int]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        out = []
        for method, path, body in ROUTES:
            r = await client.request(method, path, headers=headers, json=body)
            out.append(r.status_code)
            assert KEY not in r.text and WRONG not in r.text
        return out


@pytest.mark.asyncio
@pytest.mark.parametrize("place", sorted(PLACES))
async def test_a_wrong_key_is_refused_wherever_it_is_sent(app: Any, place: str) -> None:
    assert await _status(app, PLACES[place](WRONG)) == [401] * len(ROUTES)
    assert await _status(app, PLACES[place](PREFIX)) == [401] * len(ROUTES)
    assert await _status(app, PLACES[place]("")) == [401] * len(ROUTES)


@pytest.mark.asyncio
@pytest.mark.parametrize("place", sorted(PLACES))
async def test_the_right_key_is_accepted_wherever_it_is_sent(app: Any, place: str) -> None:
    assert await _status(app, PLACES[place](KEY)) == [200] * len(ROUTES)


@pytest.mark.asyncio
async def test_a_wrong_key_beside_nothing_else_and_no_key_at_all(app: Any) -> None:
    assert await _status(app, {}) == [401] * len(ROUTES)
    # A right key in one place does not make a wrong key elsewhere count, nor the reverse.
    mixed = {
        **PLACES["x-api-key"](WRONG),
        **PLACES["x-secrets api_key"](WRONG),
        "Authorization": "Basic " + KEY,
    }
    assert await _status(app, mixed) == [401] * len(ROUTES)
    assert await _status(app, {"X-Secrets": _secrets("other_name", KEY)}) == [401] * len(ROUTES)
    # /health needs no key.
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        assert (await client.get("/health")).status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize("which", [0, 1, 2])
async def test_every_key_of_several_is_accepted_and_a_wrong_one_still_refused(
    gsm8k: Environment, which: int
) -> None:
    keys = (KEY, "k-second-0123456789abcdef", "k-third-0123456789abcdefgh")
    app = create_app([gsm8k], ServerSettings(api_keys=keys))
    for place in ("x-api-key", "bearer", "x-secrets api_key"):
        assert await _status(app, PLACES[place](keys[which])) == [200] * len(ROUTES)
        assert await _status(app, PLACES[place](WRONG)) == [401] * len(ROUTES)


def test_the_client_of_a_request_is_its_key_never_shown_else_its_address() -> None:
    from envbuilder.server import _owners
    from envbuilder.server._access import Keys

    keys = Keys([KEY])
    for place in ("x-api-key", "bearer", "bearer-lowercase", "x-secrets api_key"):
        headers = {k.lower().encode(): v.encode() for k, v in PLACES[place](KEY).items()}
        assert keys.match(headers) == KEY.encode()
        token = _owners.CLIENT.set((keys.match(headers), ("10.0.0.1", 5)))
        try:
            name = _owners.client_name()
        finally:
            _owners.CLIENT.reset(token)
        assert name.startswith("key:") and KEY not in name and len(name) == 28
    assert keys.match({b"x-api-key": WRONG.encode()}) is None
    token = _owners.CLIENT.set((None, ("10.0.0.1", 5)))
    try:
        assert _owners.client_name() == "addr:10.0.0.1"
    finally:
        _owners.CLIENT.reset(token)
