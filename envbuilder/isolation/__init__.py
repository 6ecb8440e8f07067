"""Isolation: where untrusted code runs.

`sandbox` confines a program (bubblewrap, or a container on Docker or Podman) and
keeps session containers; `processes` runs checkers and renders in fresh, confined
worker processes that answer in bounded JSON. Time limits themselves are
`envbuilder.deadlines`, below every layer.
"""
