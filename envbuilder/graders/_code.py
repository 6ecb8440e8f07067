"""Find the code in an answer: the fenced block when the answer is prose around code.

Fences are found line by line (a line starting with three backticks or tildes opens a block,
the same fence closes it), so the work is linear in the answer's length whatever it holds.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """One fenced code block."""

    language: str
    """The info string's first word, lower-cased (``""`` when untagged)."""
    code: str


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced code block of ``text``, in order (an unclosed last block runs to the end)."""
    blocks: list[Block] = []
    fence: str | None = None
    language = ""
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None:
            for mark in ("```", "~~~"):
                if stripped.startswith(mark):
                    run = len(stripped) - len(stripped.lstrip(mark[0]))
                    fence = mark[0] * run
                    info = stripped[run:].strip().split()
                    language = info[0].lower() if info else ""
                    lines = []
                    break
        elif stripped.startswith(fence) and not stripped.lstrip(fence[0]):
            blocks.append(Block(language, "\n".join(lines)))
            fence = None
        else:
            lines.append(line)
    if fence is not None and lines:
        blocks.append(Block(language, "\n".join(lines)))
    return blocks


def extract_code(text: str, languages: Collection[str], *, require_fence: bool = False) -> str | None:
    """The code of ``text``: its first block tagged with one of ``languages``, else its first
    untagged block, else (unless ``require_fence``) the whole text. None when nothing fits."""
    blocks = fenced_blocks(text)
    wanted = {lang.lower() for lang in languages}
    for block in blocks:
        if block.language in wanted:
            return block.code
    for block in blocks:
        if not block.language:
            return block.code
    if blocks or require_fence:
        return None  # only blocks of other languages (or none at all, when one is required)
    return text
