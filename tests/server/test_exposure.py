"""Where a server may listen, tested without the CLI: a host other than loopback needs an API
key, or --public (open on purpose, with a warning)."""

from __future__ import annotations

import pytest

from envbuilder.errors import EnvbuilderError
from envbuilder.server import check_exposure


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_key(host: str) -> None:
    assert check_exposure(host, [], public=False) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.org"])
def test_another_host_needs_a_key_or_public(host: str) -> None:
    with pytest.raises(EnvbuilderError) as info:
        check_exposure(host, [], public=False)
    assert info.value.code == "exposed_without_key"
    assert str(info.value) == (
        f"--host {host} exposes the server, and every gold answer, without an API key. "
        "Pass --api-key-file (or --api-key), or --public to serve it open"
    )
    assert check_exposure(host, ["k" * 32], public=False) is None
    assert check_exposure(host, [], public=True) == (
        f"serving {host} with no API key: anyone who can reach it can use it"
    )
