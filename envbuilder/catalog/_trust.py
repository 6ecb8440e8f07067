"""Trust in a published pack: its sha256 as the catalog states it, and a signature over its lock.

The lock (``envbuilder.lock.json``) holds the sha256 of every file of the pack, so a signature
over the lock's bytes covers the whole environment. Signatures are detached Ed25519 signatures
(64 raw bytes in ``<pack>.lock.json.sig``) made with a private key the publisher names
(``--sign-key key.pem``) and checked with the public key the operator names
(``--trusted-key key.pub``); both are PEM files, as ``openssl genpkey -algorithm ed25519`` writes
them. Sigstore was the other choice; its keyless flow needs an OIDC identity and the Rekor
transparency log online, which neither an offline replica nor these tests have.

Order of checks when serving from a URL: the pack's sha256 against the catalog, then the
signature against the lock, then (on extraction, see ``_pack``) every file against the lock;
nothing from the pack is used before all three pass.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import Any

from envbuilder.catalog._files import file_sha256
from envbuilder.catalog._pack import LOCK_NAME, UNREADABLE, safe_entries
from envbuilder.errors import DataError

__all__ = ["SIGNATURE_SUFFIX", "TrustPolicy", "check_sha256", "read_lock", "sign_lock"]

log = logging.getLogger("envbuilder.catalog")

#: Appended to a lock file's name to name its detached signature.
SIGNATURE_SUFFIX = ".sig"


def read_lock(pack: Path) -> bytes:
    """The bytes of the lock inside the pack ``pack`` (what a signature covers)."""
    try:
        with zipfile.ZipFile(pack) as zf:
            # The one entry of that name extraction writes (duplicates are refused).
            for info in safe_entries(zf, pack):
                if info.filename == LOCK_NAME:
                    return zf.read(info)
            raise KeyError(LOCK_NAME)
    except (OSError, KeyError, *UNREADABLE) as exc:
        raise DataError(f"{str(pack)!r} has no readable {LOCK_NAME}: {exc}", code="pack_invalid") from None


def check_sha256(path: Path, expected: str, what: str) -> None:
    """Refuse ``path`` unless its sha256 is ``expected`` (as a catalog states it)."""
    got = file_sha256(path)
    if got != expected:
        raise DataError(
            f"{what}: sha256 {got[:16]}…, the catalog says {expected[:16]}…; refusing to use it",
            hint="The file or the catalog was changed after publishing; publish again, or delete "
            f"the cached copy {str(path)!r} if it is the one that changed",
            code="pack_mismatch",
        )


def sign_lock(lock: bytes, key_file: Path) -> bytes:
    """The detached Ed25519 signature of ``lock`` with the private key in ``key_file`` (PEM)."""
    return _read_key(key_file, private=True).sign(lock)


class TrustPolicy:
    """What a pack's signature must satisfy: a public key to check it with, and whether one is required."""

    def __init__(self, trusted_key: Path | None = None, *, require_signature: bool = False):
        self.trusted_key = trusted_key
        self.require_signature = require_signature
        self._key: Any = None
        if require_signature and trusted_key is None:
            raise DataError(
                "--require-signature needs the public key to check signatures with",
                hint="Add --trusted-key KEY.pub (openssl pkey -in key.pem -pubout -out key.pub)",
                code="signature_key",
            )
        if trusted_key is not None:
            self._key = _public_key(trusted_key)

    def check(self, lock: bytes, signature: bytes | None, what: str) -> bool:
        """Refuse ``what`` unless its lock's ``signature`` satisfies the policy; whether the
        signature was verified with the trusted key (then the pack may run its own code)."""
        if signature is None:
            if self.require_signature:
                raise DataError(
                    f"{what} has no signature and --require-signature is set; refusing to serve it",
                    hint="Publish it with --sign-key, or serve it without --require-signature",
                    code="signature_missing",
                )
            return False
        if self._key is None:
            log.warning("%s is signed but no --trusted-key is named: the signature is not checked", what)
            return False
        from cryptography.exceptions import InvalidSignature

        try:
            self._key.verify(signature, lock)
        except InvalidSignature:
            raise DataError(
                f"{what}: the signature over its lock does not verify with {str(self.trusted_key)!r}; "
                "refusing to serve it",
                hint="The pack was changed or signed with another key; check --trusted-key",
                code="signature_invalid",
            ) from None
        return True


def _public_key(path: Path) -> Any:
    return _read_key(path, private=False)


def _read_key(path: Path, *, private: bool) -> Any:
    """The Ed25519 key in the PEM file ``path``: the publisher's private (signing) key, or the
    operator's public (trusted) key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    kind: type
    if private:
        what, kind = "signing key", Ed25519PrivateKey
        hint = "Give an unencrypted Ed25519 key (PEM): openssl genpkey -algorithm ed25519 -out key.pem"
    else:
        what, kind = "trusted key", Ed25519PublicKey
        hint = "Give an Ed25519 public key in PEM: openssl pkey -in key.pem -pubout -out key.pub"
    try:
        data = path.read_bytes()
        key: Any = (
            serialization.load_pem_private_key(data, password=None)
            if private
            else serialization.load_pem_public_key(data)
        )
    except (OSError, ValueError, TypeError) as exc:
        raise DataError(
            f"cannot read the {what} {str(path)!r}: {exc}", hint=hint, code="signature_key"
        ) from None
    if not isinstance(key, kind):
        raise DataError(
            f"the {what} {str(path)!r} is a {type(key).__name__}, not Ed25519",
            hint=hint,
            code="signature_key",
        )
    return key
