"""Where a catalog is published: a local folder or an fsspec URL (``s3://``, ``gs://``), or a
HuggingFace Hub dataset repository (``hf://datasets/OWNER/NAME``, through ``huggingface_hub``).

A store reads and lists files by their path under the destination and uploads a batch of local
files; it never deletes. Credentials come from where each library looks (see ``data._remote``).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any, Protocol

from envbuilder.data._remote import check_hint, filesystem, is_url
from envbuilder.errors import DataError

__all__ = ["PublishStore", "open_store"]

_HUB = re.compile(r"^hf://datasets/(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>[^/]+))?/?$")


class PublishStore(Protocol):
    url: str
    """The destination as the user wrote it, without a trailing slash."""

    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``, or None when there is no such file."""

    def names(self) -> set[str]:
        """Every file under the destination, by its path relative to it."""

    def put(self, files: dict[str, Path], message: str) -> None:
        """Upload ``files`` (destination path → local file)."""


def open_store(dest: str) -> PublishStore:
    """The store of ``dest`` (a folder, an fsspec URL or ``hf://datasets/OWNER/NAME[@REVISION]``)."""
    if dest.startswith("hf://"):
        match = _HUB.match(dest)
        if match is None:
            raise DataError(
                f"cannot publish to {dest!r}: a Hub destination is a dataset repository",
                hint="Write hf://datasets/OWNER/NAME (optionally @REVISION)",
                code="publish_destination",
            )
        return HubStore(dest.rstrip("/"), match["repo"], match["rev"])
    return FsspecStore(dest.rstrip("/") if is_url(dest) else str(Path(dest).resolve()))


def _failed(store: PublishStore, doing: str, exc: BaseException) -> DataError:
    return DataError(
        f"cannot {doing} {store.url!r}: {type(exc).__name__}: {exc}",
        hint=check_hint(store.url),
        code="publish_failed",
    )


class FsspecStore:
    """A folder or a bucket prefix, through fsspec."""

    def __init__(self, url: str):
        self.url = url
        self._fs, self._root = filesystem(url)
        self._local = not is_url(url)

    def _path(self, name: str) -> str:
        return posixpath.join(self._root, name)

    def read(self, name: str) -> bytes | None:
        try:
            data: bytes = self._fs.cat_file(self._path(name))
            return data
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise _failed(self, f"read {name} from", exc) from None

    def names(self) -> set[str]:
        try:
            found = self._fs.find(self._root) if self._fs.exists(self._root) else []
        except Exception as exc:
            raise _failed(self, "list", exc) from None
        root = self._root.rstrip("/") + "/"
        return {p[len(root) :] for p in found if p.startswith(root)}

    def put(self, files: dict[str, Path], message: str) -> None:
        for name, local in files.items():
            target = self._path(name)
            try:
                if self._local:
                    self._fs.makedirs(posixpath.dirname(target), exist_ok=True)
                self._fs.put_file(str(local), target)
            except Exception as exc:
                raise _failed(self, f"upload {name} to", exc) from None


class HubStore:
    """A HuggingFace Hub dataset repository; one commit per publish. ``HF_ENDPOINT`` and
    ``HF_TOKEN`` are read by ``huggingface_hub`` as usual."""

    def __init__(self, url: str, repo: str, revision: str | None):
        from huggingface_hub import HfApi

        self.url = url
        self.repo = repo
        self.revision = revision
        self._api: Any = HfApi()

    def read(self, name: str) -> bytes | None:
        from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

        try:
            path = self._api.hf_hub_download(
                self.repo, name, repo_type="dataset", revision=self.revision, cache_dir=None
            )
        except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError):
            return None
        except Exception as exc:
            raise _failed(self, f"read {name} from", exc) from None
        return Path(path).read_bytes()

    def names(self) -> set[str]:
        from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

        try:
            return set(self._api.list_repo_files(self.repo, repo_type="dataset", revision=self.revision))
        except (RepositoryNotFoundError, RevisionNotFoundError):
            return set()
        except Exception as exc:
            raise _failed(self, "list", exc) from None

    def put(self, files: dict[str, Path], message: str) -> None:
        from huggingface_hub import CommitOperationAdd

        try:
            self._api.create_repo(self.repo, repo_type="dataset", exist_ok=True)
            self._api.create_commit(
                self.repo,
                [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(p)) for name, p in files.items()],
                commit_message=message,
                repo_type="dataset",
                revision=self.revision,
            )
        except Exception as exc:
            raise _failed(self, "upload to", exc) from None
