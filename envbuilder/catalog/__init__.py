"""Catalogs: many environments on one server, a catalog of them (JSON and a static site), packs."""

from envbuilder.catalog._collect import Collection, LoadFailure, find_specs, load_environments
from envbuilder.catalog._entry import build_catalog, catalog_entry
from envbuilder.catalog._files import content_hash, file_sha256
from envbuilder.catalog._pack import PackInfo, is_pack, load_pack, open_pack, pack
from envbuilder.catalog._site import render_readme, write_site

__all__ = [
    "Collection",
    "LoadFailure",
    "PackInfo",
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
    "render_readme",
    "write_site",
]
