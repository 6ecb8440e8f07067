"""Lazy datasets: source plugins (Parquet, …) and the splits an environment serves."""

from envbuilder.data._base import Row, Source, SourceConfig, Table, sources
from envbuilder.data._convert import to_json
from envbuilder.data._files import detect_encoding
from envbuilder.data._hf import hub_unreachable
from envbuilder.data._maps import parse_slice
from envbuilder.data._splits import SplitView, Task, TaskShaper

__all__ = [
    "Row",
    "Source",
    "SourceConfig",
    "SplitView",
    "Table",
    "Task",
    "TaskShaper",
    "detect_encoding",
    "hub_unreachable",
    "parse_slice",
    "sources",
    "to_json",
]
