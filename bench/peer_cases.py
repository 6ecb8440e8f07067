"""Collect other graders' public test tables as (gold, answer, verdict) cases for our tests.

    python bench/peer_cases.py REPO_CHECKOUT PATH [PATH ...] --repo owner/name --out FILE.json

Reads each test file at the checkout's ``HEAD`` (``git show``), finds every
``@pytest.mark.parametrize`` table whose argument names include ``gold``, ``pred`` and
``expected``, and keeps the rows whose values are literals. The other arguments of a row
(``precision``, ``language``, ``strict``…) are kept as ``options``: a row that asks the peer
for a non-default setting states a convention of that call, which the tests treat as such.
The file records the repository, path and commit of every case, so each is traceable.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path
from typing import Any


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Attribute):  # Language.CHINESE -> "chinese"
        return node.attr.lower()
    return ast.literal_eval(node)


def cases_of(source: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                continue
            names_node, rows_node = deco.args[:2]
            names = [n.strip() for n in ast.literal_eval(names_node).split(",")]
            if not {"gold", "pred", "expected"} <= set(names) or not isinstance(rows_node, ast.List):
                continue
            for row in rows_node.elts:
                if not isinstance(row, ast.Tuple):
                    continue
                try:
                    values = dict(zip(names, (_literal(e) for e in row.elts), strict=True))
                except (ValueError, TypeError, SyntaxError):
                    continue
                gold, pred, expected = values.pop("gold"), values.pop("pred"), values.pop("expected")
                if not (isinstance(gold, str) and isinstance(pred, str)):
                    continue
                found.append(
                    {
                        "test": fn.name,
                        "line": row.lineno,
                        "gold": gold,
                        "answer": pred,
                        "expected": int(bool(expected)),
                        "options": values,
                    }
                )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", *argv], cwd=args.checkout, check=True, capture_output=True, text=True
        ).stdout

    commit = git("rev-parse", "HEAD").strip()
    cases = []
    for path in args.paths:
        for case in cases_of(git("show", f"HEAD:{path}")):
            cases.append({"path": path, **case})
    data = {"repo": args.repo, "commit": commit, "cases": cases}
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(cases)} cases from {args.repo}@{commit[:10]}")


if __name__ == "__main__":
    main()
