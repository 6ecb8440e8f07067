"""HuggingFace datasets (a hub repo id or a local hub-shaped folder), read lazily.

Only this module touches the ``datasets`` library, and only inside functions (importing it
costs about a second). The builder resolves the config, revision, ``data_files`` and
``data_dir`` into data files per split; Parquet files are then read in place by the same lazy
``ParquetTable`` as `type: parquet`. Other formats are prepared once by ``datasets`` into its
Arrow cache and served memory-mapped. Remote code never runs (``datasets`` ≥ 4 has none), and
with ``HF_HUB_OFFLINE=1`` everything comes from the local cache.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from envbuilder.data._base import Source, SourceConfig, Table
from envbuilder.data._remote import fetch, is_url
from envbuilder.errors import DataError

DataFiles = str | list[str] | dict[str, str | list[str]]


class HuggingFaceConfig(SourceConfig):
    """A dataset on the HuggingFace hub, or a local folder laid out like a hub repo."""

    type: Literal["huggingface"]
    path: str
    """A hub repo id (`openai/gsm8k`) or a local folder (relative to the spec file)."""
    config: str | None = None
    """The dataset's config (subset) name, e.g. `main`."""
    revision: str | None = None
    """A branch, tag or commit of the hub repo."""
    data_files: DataFiles | None = None
    """Data files to read instead of the repo's defaults: a path or glob, a list, or `{split: files}`;
    `s3://`, `gs://`, `https://` and `hf://` URLs are fetched once into the cache."""
    data_dir: str | None = None
    """A folder of the repo to read the data files from."""


_HINT = (
    "If it is on the hub, run once with network access and HF_HUB_OFFLINE=0 to cache it "
    "(later starts work offline), or point `dataset.path` at a local folder"
)


class HuggingFaceSource(Source):
    Config = HuggingFaceConfig
    config: HuggingFaceConfig

    @property
    def _path(self) -> str:
        local = Path(self.config.path).expanduser()
        local = local if local.is_absolute() else self.base_dir / local
        return str(local) if local.is_dir() else self.config.path

    @cached_property
    def _builder(self) -> Any:
        try:
            import datasets
        except ImportError:  # pragma: no cover - a declared dependency
            raise DataError(
                "`type: huggingface` needs the `datasets` package", code="data_unavailable"
            ) from None
        cfg = self.config
        try:
            return datasets.load_dataset_builder(
                self._path,
                name=cfg.config,
                revision=cfg.revision,
                data_files=_fetched(cfg.data_files),
                data_dir=cfg.data_dir,
            )
        except (ConnectionError, TimeoutError) as exc:
            raise DataError(
                f"dataset {cfg.path!r} is not in the local cache and the hub cannot be reached"
                f" ({_offline_note()}): {exc}",
                hint=_HINT,
                code="data_unavailable",
            ) from None
        except Exception as exc:
            # datasets raises many types (DatasetNotFoundError, ValueError for an unknown
            # config, FileNotFoundError, …); each is a problem with the spec's dataset block.
            raise DataError(
                f"cannot load dataset {cfg.path!r}: {exc}",
                hint=_HINT if "/" in cfg.path and not Path(self._path).is_dir() else None,
                code="data_unavailable",
            ) from None

    @cached_property
    def _files(self) -> dict[str, list[str]]:
        files = self._builder.config.data_files or {}
        return {str(split): list(paths) for split, paths in files.items()}

    def split_names(self) -> list[str]:
        names = list(self._files)
        if not names and self._builder.info.splits:
            names = list(self._builder.info.splits)
        return names

    def open(self, split: str) -> Table:
        builder = self._builder
        if builder.name == "parquet" and split in self._files:
            try:
                import datasets

                local = datasets.DownloadManager().download(self._files[split])
                from envbuilder.data._parquet import ParquetTable  # pyarrow: only when read

                return ParquetTable([Path(p) for p in local])
            except DataError:
                raise
            except Exception as exc:
                raise DataError(
                    f"cannot fetch the files of split {split!r}: {exc}", hint=_HINT, code="data_unavailable"
                ) from None
        try:
            builder.download_and_prepare()
            from envbuilder.data._ipc import ArrowTable

            return ArrowTable(builder.as_dataset(split=split).data.table)
        except Exception as exc:
            raise DataError(
                f"cannot prepare split {split!r} of {self.config.path!r}: {exc}",
                hint=_HINT,
                code="data_unavailable",
            ) from None

    def files(self) -> list[Path]:
        """The data files of a local folder (a hub dataset's files live in the HF cache: none)."""
        if not Path(self._path).is_dir():
            return []
        return sorted({Path(p) for paths in self._files.values() for p in paths if Path(p).is_file()})

    def describe(self) -> dict[str, Any]:
        return {"type": "huggingface", **self.config.model_dump(exclude={"type"}, exclude_none=True)}


def _fetched(files: DataFiles | None) -> DataFiles | None:
    """``data_files`` with each URL (s3://, gs://, https://, hf://) replaced by its copy in our cache."""
    if files is None:
        return None
    if isinstance(files, dict):
        return {split: _fetched(paths) for split, paths in files.items()}  # type: ignore[misc]
    if isinstance(files, list):
        return [str(fetch(f)) if is_url(f) else f for f in files]
    return str(fetch(files)) if is_url(files) else files


def _offline_note() -> str:
    offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False")
    return "HF_HUB_OFFLINE is set" if offline else "no network"
