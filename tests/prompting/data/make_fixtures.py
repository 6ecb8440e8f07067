"""Writes the conversation fixtures beside this file: ``python tests/prompting/data/make_fixtures.py``.

``rich.parquet``: conversations in the canonical ORS wire shape (reasoning, tool calls, tool
results, images), stored as Parquet structs. ``misplaced.parquet``: the same, with a tool result
in an assistant turn in row 1.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent
PNG = base64.b64encode(
    pq.read_table(HERE.parents[2] / "envs/data/digits/test-00000-of-00001.parquet", columns=["image"])
    .column("image")[0]
    .as_py()["bytes"]
).decode()


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def call(id_: str, expr: str) -> dict:
    return {"type": "tool_call", "id": id_, "name": "calculator", "input": {"expr": expr}}


def result(id_: str, blocks: list[dict], is_error: bool = False) -> dict:
    return {"type": "tool_result", "tool_call_id": id_, "blocks": blocks, "is_error": is_error}


ROWS = [
    {  # docs/protocol.md §7.1's example conversation
        "id": "c0",
        "conversation": [
            {"role": "system", "blocks": [text("You are a careful assistant.")]},
            {"role": "user", "blocks": [text("What is 6*7? Use the calculator.")]},
            {
                "role": "assistant",
                "blocks": [
                    {"type": "reasoning", "text": "I should call the calculator."},
                    text("Let me compute that."),
                    call("call_1", "6*7"),
                ],
            },
            {"role": "user", "blocks": [result("call_1", [text("42")]), text("Now give the final answer.")]},
        ],
        "answer": "42",
    },
    {  # one plain user message: /prompt serves its blocks verbatim
        "id": "c1",
        "conversation": [{"role": "user", "blocks": [text("What is 2+3?")]}],
        "answer": "5",
    },
    {  # an image inside a failed tool result, no reasoning
        "id": "c2",
        "conversation": [
            {"role": "user", "blocks": [text("Which digit does the tool show?")]},
            {"role": "assistant", "blocks": [call("call_9", "render")]},
            {
                "role": "user",
                "blocks": [
                    result("call_9", [{"type": "image", "data": PNG, "mimeType": "image/png"}], is_error=True)
                ],
            },
        ],
        "answer": "0",
    },
]


def main() -> None:
    pq.write_table(pa.Table.from_pylist(ROWS), HERE / "rich.parquet")
    bad = [dict(r) for r in ROWS[:2]]
    bad[1] = {
        "id": "bad1",
        "conversation": [
            {"role": "user", "blocks": [text("Hi")]},
            {"role": "assistant", "blocks": [result("call_1", [text("42")])]},
        ],
        "answer": "x",
    }
    pq.write_table(pa.Table.from_pylist(bad), HERE / "misplaced.parquet")


if __name__ == "__main__":
    main()
