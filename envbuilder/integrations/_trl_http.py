"""TRL over HTTP: TRL's own ORS adapter (``trl.experimental.openreward.OpenRewardSpec``) pointed
at an ``envbuilder serve`` URL, with no environment variable.

The openreward client TRL's adapter builds derives where sessions live from its base URL by
prepending ``sessions.`` to the host (``http://127.0.0.1:8082`` becomes
``http://sessions.127.0.0.1:8082``, which resolves nowhere: 67 s of retries, then
``Cannot connect to host sessions.127.0.0.1:8082``) unless ``OPENREWARD_SESSION_URL`` is set.
An envbuilder server serves sessions at its own URL, so :func:`served_spec` hands the adapter a
client whose session URL is the server's. TRL's adapter itself is unchanged; it needs ``trl``
without its torch dependencies (``pip install --no-deps trl``) and ``openreward``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["served_spec"]


def served_spec(url: str, **options: Any) -> Any:
    """TRL's ``OpenRewardSpec(url, **options)`` whose sessions go to ``url`` itself.

    Args:
        url: The server's URL, e.g. ``http://127.0.0.1:8082`` (``envbuilder serve`` prints it).
        options: ``OpenRewardSpec``'s own: ``env_name`` (on a server of several specs),
            ``split``, ``num_tasks``, ``indices``, ``api_key``, ``secrets``.

    Returns:
        The spec, whose ``train_dataset``, ``environment_factory`` and ``reward_funcs`` go to
        ``GRPOTrainer`` as usual.
    """
    try:
        import openreward
        from trl.experimental.openreward import OpenRewardSpec
    except ImportError as exc:
        raise ImportError(
            "TRL's ORS adapter needs trl and openreward: pip install --no-deps trl && pip install openreward"
        ) from exc
    url = url.rstrip("/")
    spec = OpenRewardSpec(url, **options)
    api_key = options.get("api_key")
    client = openreward.OpenReward(**({"api_key": api_key} if api_key else {}), base_url=url)
    client.session_base_url = url  # where an envbuilder server serves its sessions
    # The spec builds its client on first use (a cached property, which an instance value
    # overrides): every dataset read and rollout then goes through this one.
    spec.__dict__["_sdk_client"] = client
    return spec
