"""envbuilder's version (read by the build, reported by the CLI, the server and every record)."""

__version__ = "0.1.0"
