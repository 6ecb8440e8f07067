"""Catalogs: many environments on one server, a catalog of them (JSON and a static site), packs."""

from envbuilder.catalog._collect import Collection, LoadFailure, find_specs, load_environments
from envbuilder.catalog._entry import build_catalog, catalog_entry
from envbuilder.catalog._files import content_hash, file_sha256
from envbuilder.catalog._pack import PackInfo, is_pack, load_pack, open_pack, pack
from envbuilder.catalog._publish import PublishReport, publish, serve_command
from envbuilder.catalog._pull import Pulled, pull
from envbuilder.catalog._site import render_readme, write_site
from envbuilder.catalog._trust import TrustPolicy

__all__ = [
    "Collection",
    "LoadFailure",
    "PackInfo",
    "PublishReport",
    "Pulled",
    "TrustPolicy",
    "build_catalog",
    "catalog_entry",
    "content_hash",
    "file_sha256",
    "find_specs",
    "is_pack",
    "load_environments",
    "load_pack",
    "open_pack",
    "pack",
    "publish",
    "pull",
    "render_readme",
    "serve_command",
    "write_site",
]
