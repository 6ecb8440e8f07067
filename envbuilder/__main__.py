"""``python -m envbuilder``."""

from envbuilder.cli import main

main()
