"""Lazy datasets: source plugins (Parquet, …) and the splits an environment serves."""

from envbuilder.data._base import Row, Source, SourceConfig, Table, sources
from envbuilder.data._convert import to_json
from envbuilder.data._encoding import detect_encoding
from envbuilder.data._profile import PROFILE_FIELDS, Profile, histogram, read_profile
from envbuilder.data._remote import hub_unreachable
from envbuilder.data._splits import SplitView, Task, TaskShaper
from envbuilder.spec import parse_slice

__all__ = [
    "PROFILE_FIELDS",
    "Profile",
    "Row",
    "Source",
    "SourceConfig",
    "SplitView",
    "Table",
    "Task",
    "TaskShaper",
    "detect_encoding",
    "histogram",
    "hub_unreachable",
    "parse_slice",
    "read_profile",
    "sources",
    "to_json",
]
