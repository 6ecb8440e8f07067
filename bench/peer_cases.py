"""Collect other graders' public test tables as (gold, answer, verdict) cases for our tests.

    python bench/peer_cases.py MIRRORS [NAME ...]

``MIRRORS`` holds one git directory per repository (``owner+name/repo``, as the ``fetch`` tool
leaves them, or any clone at ``MIRRORS/owner+name``). For each source in :data:`SOURCES` (all
of them, or the ``NAME``\\ s given) it reads the listed test files at the checkout's ``HEAD``
(``git show``), parses them (never imports or runs them) and writes
``tests/graders/peers/NAME.json``: the repository, commit, licence (its SPDX name, the file it
is in and its copyright line) and, per case, the path, test function and line it comes from.

Two readers cover the tables peers write:

- :class:`Table`: every row of a ``@pytest.mark.parametrize`` or ``@parameterized.expand``
  table whose values are literals. ``gold`` and ``answer`` name the row's arguments (or an
  item of one: ``pair[0]``, ``case['completion']``); the verdict is the ``expected`` argument
  (true or a positive reward passes), or fixed per test function (``verdicts``): a table of
  pairs a test asserts equal (or a normaliser maps to one form) is a table of passes.
- :class:`Calls`: every call of the peer's grading function in a test whose arguments are
  literals (or local names bound to literals, indexed as the call does: ``solution[0]``), with
  the verdict the nearest assertion on it states (``assert f(…)``, ``assert not f(…)``,
  ``assertFalse(…)``, ``assert r == 1.0``, ``assertEqual(r[0], 0.0)``, ``r.is_correct is True``).

Arguments other than the gold, the answer and the verdict are kept as ``options``: a row that
asks the peer for a non-default setting states a convention of that call, which the tests treat
as such. Which verdicts are conventions is decided by hand, per case, in
``tests/graders/peers/conventions.json``; this script only transcribes.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "graders" / "peers"


@dataclass(frozen=True)
class Table:
    """Rows of parametrized tests in ``path`` (see the module docstring)."""

    path: str
    gold: str = "gold"
    answer: str = "pred"
    expected: str | None = "expected"
    verdicts: dict[str, int] = field(default_factory=dict)
    """Test function name → the verdict of all its rows (when rows carry none)."""
    tests: str = ".*"
    """Only test functions whose name matches."""
    symmetric: bool = False
    """The test asserts both orders (``f(a, b)`` and ``f(b, a)``): two cases per row."""
    graders: tuple[str, ...] | None = None
    """The graders its cases measure, when not the source's (written on each case)."""


@dataclass(frozen=True)
class Calls:
    """Asserted calls of ``function`` in ``path`` (see the module docstring)."""

    path: str
    function: str
    gold: int | str
    """The gold's argument: a position or a keyword, then an optional item path (``1[{row}]``:
    the asserted row of a batch, ``0['ground_truth']``)."""
    answer: int | str
    tests: str = ".*"
    graders: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Source:
    repo: str
    license: str
    license_path: str
    graders: tuple[str, ...]
    """The envbuilder graders this table measures: ``math``, ``exact_match`` (``extract:
    number``; numeric golds only) or ``choice``."""
    readers: tuple[Table | Calls, ...]
    about: str = ""


SOURCES: dict[str, Source] = {
    "math_verify": Source(
        "huggingface/Math-Verify",
        "MIT",
        "tests/test_all.py",  # the test files carry their own MIT header (the repository: Apache-2.0)
        ("math",),
        (
            *(
                Table(f"tests/{name}.py")
                for name in (
                    "test_all",
                    "test_boxed",
                    "test_numina_cases",
                    "test_open_thoughts",
                    "test_strict",
                )
            ),
            Table("tests/test_yujianll.py", expected="result"),
        ),
        "math-verify's own regression tables.",
    ),
    "lighteval": Source(
        "huggingface/lighteval",
        "MIT",
        "LICENSE",
        ("math", "choice"),
        (
            Table(
                "tests/unit/metrics/test_extractive_match.py",
                tests="(?!test_(multilingual_)?extraction_abc).*",
            ),
            Table(
                "tests/unit/metrics/test_extractive_match.py",
                tests="test_(multilingual_)?extraction_abc",
                graders=("choice",),
            ),
        ),
        "lighteval's extractive-match metric (math-verify inside); its letter tables measure `choice`.",
    ),
    "hendrycks_math": Source(
        "hendrycks/math",
        "MIT",
        "LICENSE",
        ("math",),
        (Calls("modeling/math_equivalence_test.py", "is_equiv", gold=0, answer=1),),
        "The MATH dataset's own `is_equiv` tests.",
    ),
    "nemo_skills": Source(
        "NVIDIA/NeMo-Skills",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (
            Table(
                "tests/test_math_equal.py",
                gold="output_pair[0]",
                answer="output_pair[1]",
                expected=None,
                verdicts={"test_correct_examples": 1, "test_incorrect_examples": 0},
                symmetric=True,
            ),
        ),
        "NeMo-Skills' `math_equal`, asserted in both orders.",
    ),
    "skyrl_aime": Source(
        "NovaSky-AI/SkyRL",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (Table("skyrl-gym/tests/test_aime.py", gold="ground_truth", answer="output"),),
        "skyrl-gym's AIME environment's reward (a boxed answer, compared as normalised text).",
    ),
    "skyrl_gsm8k": Source(
        "NovaSky-AI/SkyRL",
        "Apache-2.0",
        "LICENSE",
        ("math", "exact_match"),
        (Table("skyrl-gym/tests/test_gsm8k.py", gold="ground_truth", answer="output"),),
        "skyrl-gym's GSM8K environment's reward (`####` required).",
    ),
    "open_instruct_gsm8k": Source(
        "allenai/open-instruct",
        "Apache-2.0",
        "LICENSE",
        ("math", "exact_match"),
        (
            Table(
                "open_instruct/test_ground_truth_utils.py",
                gold="label",
                answer="prediction",
                expected="expected_score",
                tests="test_signed_number_extraction",
            ),
        ),
        "open-instruct's GSM8K verifier (the last number).",
    ),
    "verifiers": Source(
        "PrimeIntellect-ai/verifiers",
        "MIT",
        "LICENSE",
        ("math",),
        (
            Table(
                "tests/test_math_rubric.py",
                gold="test_case['answer']",
                answer="test_case['completion']",
                expected=None,
                verdicts={"test_score_valid_answers": 1, "test_score_invalid_answers": 0},
            ),
        ),
        "verifiers' MathRubric (math-verify inside).",
    ),
    "slime": Source(
        "THUDM/slime",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (
            Table(
                "tests/test_rm_math.py",
                gold="expected",
                answer="raw",
                expected=None,
                verdicts={"test_strip_string_canonical_substitutions": 1},
            ),
            Table(
                "tests/test_rm_math.py",
                gold="gt",
                answer="given",
                expected=None,
                verdicts={"test_grade_answer_mathd_canonical_equivalences": 1},
            ),
            Calls("tests/test_rm_math.py", "grade_answer_mathd", gold=1, answer=0),
            Calls("tests/test_rm_math.py", "grade_answer_sympy", gold=1, answer=0),
            Calls("tests/test_rm_math.py", "grade_answer_verl", gold=1, answer=0),
            Table(
                "tests/test_rm_math_dapo.py",
                gold="expected",
                answer="raw",
                expected=None,
                verdicts={"test_normalize_final_answer_canonical_substitutions": 1},
            ),
            Calls("tests/test_rm_math_dapo.py", "compute_score", gold=1, answer=0),
            Calls("tests/test_rm_math_dapo.py", "is_correct_minerva", gold=1, answer=0),
            Calls("tests/test_rm_math_dapo.py", "is_correct_strict_box", gold=1, answer=0),
            Calls("tests/test_rm_math_dapo.py", "verify", gold=1, answer=0),
            Calls("tests/test_rm_deepscaler.py", "get_deepscaler_rule_based_reward", gold=1, answer=0),
        ),
        "slime's math reward functions (Hendrycks normalisation, SymPy, DAPO, DeepScaleR).",
    ),
    "areal": Source(
        "inclusionAI/AReaL",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (
            Calls("tests/test_math_verify_reward.py", "gsm8k_reward_fn", gold="answer", answer="completions"),
            Calls(
                "tests/test_math_verify_reward.py",
                "geometry3k_reward_fn",
                gold="answer",
                answer="completions",
            ),
        ),
        "AReaL's GSM8K and Geometry3K rewards (math-verify inside).",
    ),
    "open_r1": Source(
        "huggingface/open-r1",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (
            Calls(
                "tests/test_rewards.py", "accuracy_reward", gold="1[{row}]", answer="0[{row}][0]['content']"
            ),
        ),
        "open-r1's accuracy reward (math-verify inside).",
    ),
    "open_instruct": Source(
        "allenai/open-instruct",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (
            Table(
                "open_instruct/test_math_utils.py",
                gold="expected_output",
                answer="input_string",
                expected=None,
                verdicts={"test_latex_normalization": 1},
            ),
        ),
        "open-instruct's Hendrycks-style `strip_string` (each input and its normal form are one answer).",
    ),
    "mindspeed_rl": Source(
        "Ascend/MindSpeed-RL",
        "MIT",
        "LICENSE",
        ("math",),
        (
            Calls("tests/ut/utils/test_grader.py", "math_equal", gold=1, answer=0),
            Calls("tests/ut/models/test_math_dapo.py", "is_correct_minerva", gold=1, answer=0),
            Calls("tests/ut/models/test_math_dapo.py", "is_correct_strict_box", gold=1, answer=0),
            Calls("tests/ut/models/test_math_dapo.py", "verify", gold=1, answer=0),
            Calls("tests/ut/models/test_math_dapo.py", "compute_score", gold=1, answer=0),
            Calls("tests/ut/models/test_verifier.py", "accuracy_reward", gold="1[0]", answer="0[0]"),
            Calls(
                "tests/ut/models/test_verifier.py", "base_model_accuracy_reward", gold="1[0]", answer="0[0]"
            ),
        ),
        "MindSpeed-RL's Qwen-style `math_equal` (a relative tolerance of 1e-4), DAPO and R1 rewards.",
    ),
    "ms_swift": Source(
        "modelscope/ms-swift",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (Calls("tests/utils/test_rewards.py", "math_accuracy", gold="1[{row}]", answer="0[{row}]"),),
        "ms-swift's MathAccuracy reward (math-verify inside; `<answer>` tags read).",
    ),
    "rllm": Source(
        "rllm-org/rllm",
        "Apache-2.0",
        "LICENSE",
        ("math",),
        (
            Calls(
                "tests/rewards/test_math_reward.py",
                "reward",
                gold="0['ground_truth']",
                answer=1,
            ),
        ),
        "rLLM's math reward (a `<think>` section and a box required).",
    ),
}


# -- reading a test file ---------------------------------------------------------------------


def _literal(node: ast.AST, env: dict[str, Any] | None = None) -> Any:
    """The value of ``node`` when it is a literal, a name bound to one in ``env``, or an
    expression of them (``5 / 2``, ``"a" + "b"``, ``Language.CHINESE`` → ``"chinese"``)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id[:1].isupper():
        return node.attr.lower()
    if isinstance(node, ast.Name) and env is not None and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.Add | ast.Mult | ast.Sub):
        left, right = _literal(node.left, env), _literal(node.right, env)
        ops = {ast.Div: lambda a, b: a / b, ast.Add: lambda a, b: a + b}
        ops |= {ast.Mult: lambda a, b: a * b, ast.Sub: lambda a, b: a - b}
        return ops[type(node.op)](left, right)
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k, env): _literal(v, env) for k, v in zip(node.keys, node.values, strict=True) if k}
    return ast.literal_eval(node)


def _item(value: Any, path: str) -> Any:
    """``value`` indexed by ``path`` (``[0]['content']``)."""
    for key in re.findall(r"\[([^\]]+)\]", path):
        value = value[ast.literal_eval(key)]
    return value


def _text(value: Any) -> str | None:
    """A gold or an answer as text (NeMo-Skills passes numbers: ``5``, ``0.5``); None for None."""
    if value is None or isinstance(value, bool | list | dict):
        return None  # no gold, or several (envbuilder's `math` grader takes one)
    return value if isinstance(value, str) else str(value)


def _verdict(value: Any) -> int | None:
    """1 for a pass (True, a positive reward), 0 for a fail; None when not a verdict."""
    if isinstance(value, list) and len(value) == 1:  # a batch of one: `== [1.0]`
        value = value[0]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value > 0)
    return None


def _tables(tree: ast.AST, reader: Table) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or not re.fullmatch(
            reader.tests, fn.name
        ):
            continue
        for deco in fn.decorator_list:
            if not isinstance(deco, ast.Call):
                continue
            kind = getattr(deco.func, "attr", "")
            if kind == "parametrize":
                names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
                rows_node = deco.args[1]
            elif kind == "expand":
                names = [a.arg for a in fn.args.args if a.arg != "self"]
                rows_node = deco.args[0]
            else:
                continue
            if not isinstance(rows_node, ast.List):
                continue
            for row in rows_node.elts:
                try:
                    values = _literal(row)
                except (ValueError, TypeError, SyntaxError, KeyError):
                    continue
                if len(names) == 1:
                    values = [values]
                if not isinstance(values, list) or len(values) != len(names):
                    continue
                bound = dict(zip(names, values, strict=True))
                case = _case(bound, reader, fn.name)
                if case is None:
                    continue
                gold, answer, expected, options = case
                found.append(_row(fn.name, row.lineno, gold, answer, expected, options))
                if reader.symmetric:
                    found.append(_row(fn.name, row.lineno, answer, gold, expected, options))
    return found


def _case(bound: dict[str, Any], reader: Table, test: str) -> tuple[str, str, int, dict[str, Any]] | None:
    def pick(spec: str) -> Any:
        name = spec.split("[", 1)[0]
        return _item(bound[name], spec[len(name) :])

    if not {spec.split("[", 1)[0] for spec in (reader.gold, reader.answer)} <= bound.keys():
        return None
    if reader.expected is not None and reader.expected not in bound:
        return None
    gold, answer = _text(pick(reader.gold)), _text(pick(reader.answer))
    expected = reader.verdicts.get(test) if reader.expected is None else _verdict(bound[reader.expected])
    if gold is None or answer is None or expected is None:
        return None
    used = {spec.split("[", 1)[0] for spec in (reader.gold, reader.answer, reader.expected or "")}
    options = {k: v for k, v in bound.items() if k not in used and k != "name" and not k.startswith("_")}
    return gold, answer, expected, options


def _row(
    test: str, line: int, gold: str, answer: str, expected: int, options: dict[str, Any]
) -> dict[str, Any]:
    return {
        "test": test,
        "line": line,
        "gold": gold,
        "answer": answer,
        "expected": expected,
        "options": options,
    }


def _calls(tree: ast.AST, reader: Calls) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or not re.fullmatch(
            reader.tests, fn.name
        ):
            continue
        env: dict[str, Any] = {}
        results: dict[str, tuple[ast.Call, int]] = {}
        asserted: set[tuple[int, int]] = set()  # (call, row): its first assertion only
        for stmt in _statements(fn.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target_node = stmt.targets[0]
                if isinstance(target_node, ast.Tuple) and target_node.elts:
                    target_node = target_node.elts[0]  # `score, pred = f(…)`: the verdict comes first
                if not isinstance(target_node, ast.Name):
                    continue
                target = target_node.id
                call = _call_of(stmt.value, reader.function)
                if call is not None:
                    results[target] = (call, stmt.lineno)
                    continue
                try:
                    env[target] = _literal(stmt.value, env)
                except (ValueError, TypeError, SyntaxError, KeyError, ZeroDivisionError):
                    env.pop(target, None)
                continue
            verdict = _asserted(stmt, reader.function, results)
            if verdict is None:
                continue
            call, line, row, expected = verdict
            if (id(call), row) in asserted:
                continue
            asserted.add((id(call), row))
            try:
                gold = _text(_argument(call, reader.gold, env, row))
                answer = _text(_argument(call, reader.answer, env, row))
            except (ValueError, TypeError, SyntaxError, KeyError, IndexError):
                continue
            if gold is not None and answer is not None:
                found.append(_row(fn.name, line, gold, answer, expected, _keywords(call, reader, env)))
    return found


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of ``body`` in order, those inside ``try``/``with``/``for`` blocks included."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, block, None)
            if isinstance(inner, list) and not isinstance(stmt, ast.FunctionDef | ast.ClassDef):
                out.extend(_statements(inner))
    return out


def _call_of(node: ast.AST, function: str) -> ast.Call | None:
    """The call of ``function`` that ``node`` is (``f(…)``, ``obj.f(…)``, ``await f(…)``)."""
    if isinstance(node, ast.Await):
        node = node.value
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name == function:
            return node
    return None


def _asserted(
    stmt: ast.stmt, function: str, results: dict[str, tuple[ast.Call, int]]
) -> tuple[ast.Call, int, int, int] | None:
    """(the call, its line, its row, the verdict) that ``stmt`` asserts, if it asserts one."""
    if isinstance(stmt, ast.Assert):
        return _truth(stmt.test, function, results, True)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        method = getattr(stmt.value.func, "attr", "")
        args = stmt.value.args
        if method in ("assertTrue", "assertFalse") and args:
            return _truth(args[0], function, results, method == "assertTrue")
        if method in ("assertEqual", "assertIs", "assertAlmostEqual") and len(args) >= 2:
            return _equal(args[0], args[1], function, results)
    return None


def _truth(
    node: ast.AST, function: str, results: dict[str, tuple[ast.Call, int]], positive: bool
) -> tuple[ast.Call, int, int, int] | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _truth(node.operand, function, results, not positive)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.Is):
        found = _equal(node.left, node.comparators[0], function, results)
        if found is not None and not positive:
            return (*found[:3], 1 - found[3])
        return found
    source = _source(node, function, results)
    return (*source, int(positive)) if source is not None else None


def _equal(
    left: ast.AST, right: ast.AST, function: str, results: dict[str, tuple[ast.Call, int]]
) -> tuple[ast.Call, int, int, int] | None:
    for value_node, expected_node in ((left, right), (right, left)):
        if isinstance(value_node, ast.Tuple) and value_node.elts:
            value_node = value_node.elts[0]  # `(score, pred) == (1, "42")`
            expected_node = expected_node.elts[0] if isinstance(expected_node, ast.Tuple) else expected_node
        source = _source(value_node, function, results)
        if source is None:
            continue
        try:
            expected = ast.literal_eval(expected_node)
        except ValueError:
            return None
        if isinstance(expected, dict):  # `out == {"score": 1.0, "acc": True, …}`
            expected = next((expected[k] for k in ("score", "acc", "reward") if k in expected), None)
        verdict = _verdict(expected)
        return (*source, verdict) if verdict is not None else None
    return None


def _source(
    node: ast.AST, function: str, results: dict[str, tuple[ast.Call, int]]
) -> tuple[ast.Call, int, int] | None:
    """(the call, its line, the row) whose verdict ``node`` reads: the call itself, or a result
    named, indexed (``r[1]``: row 1 of a batch) or read as a verdict (``r.is_correct``,
    ``r.reward``, ``r['score']``)."""
    call = _call_of(node, function)
    if call is not None:
        return call, call.lineno, 0
    row = 0
    while isinstance(node, ast.Subscript) or (
        isinstance(node, ast.Attribute) and node.attr in ("is_correct", "reward", "score")
    ):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            row = node.slice.value if isinstance(node.slice.value, int) else row
        node = node.value
    if isinstance(node, ast.Name) and node.id in results:
        return (*results[node.id], row)
    return None


def _keywords(call: ast.Call, reader: Calls, env: dict[str, Any]) -> dict[str, Any]:
    """The call's other keyword arguments with literal values (``strict_box_verify=True``)."""
    used = {str(spec).split("[", 1)[0] for spec in (reader.gold, reader.answer)}
    out = {}
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg in used:
            continue
        try:
            out[keyword.arg] = _literal(keyword.value, env)
        except (ValueError, TypeError, SyntaxError, KeyError):
            continue
    return out


def _argument(call: ast.Call, spec: int | str, env: dict[str, Any], row: int) -> Any:
    """The argument ``spec`` names: ``0``, ``"answer"``, ``"1[{row}]"`` (the asserted row of a
    batch), ``"0['ground_truth']"``."""
    text = str(spec).replace("{row}", str(row))
    head = text.split("[", 1)[0]
    node = call.args[int(head)] if head.isdigit() else next(k.value for k in call.keywords if k.arg == head)
    return _item(_literal(node, env), text[len(head) :])


_COPYRIGHT = re.compile(r"Copyright\s+(?:\([cC]\)\s*)?\d{4}[^\n]*")


def collect(source: Source, git_dir: Path) -> dict[str, Any]:
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=git_dir, check=True, capture_output=True, text=True).stdout

    commit = git("rev-parse", "HEAD").strip()
    # The copyright line: the licence's, else the first test file's header (Apache-2.0 texts have none).
    texts = [git("show", f"HEAD:{source.license_path}"), git("show", f"HEAD:{source.readers[0].path}")]
    owners = (_COPYRIGHT.search(text) for text in texts)
    copyright_line = next((m.group().strip() for m in owners if m), f"the {source.repo} authors")
    cases: list[dict[str, Any]] = []
    for reader in source.readers:
        tree = ast.parse(git("show", f"HEAD:{reader.path}"))
        rows = _tables(tree, reader) if isinstance(reader, Table) else _calls(tree, reader)
        extra = {"graders": list(reader.graders)} if reader.graders else {}
        cases.extend({"path": reader.path, **row, **extra} for row in rows)
    cases.sort(key=lambda c: (c["path"], c["line"]))
    return {
        "repo": source.repo,
        "commit": commit,
        "license": source.license,
        "license_file": source.license_path,
        "copyright": copyright_line,
        "graders": list(source.graders),
        "about": source.about,
        "cases": cases,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mirrors", type=Path)
    parser.add_argument("names", nargs="*", help=f"sources (default: all): {', '.join(SOURCES)}")
    args = parser.parse_args()
    unknown = set(args.names) - set(SOURCES)
    if unknown:
        parser.error(f"unknown sources: {', '.join(sorted(unknown))}")
    for name in args.names or list(SOURCES):
        source = SOURCES[name]
        folder = args.mirrors / source.repo.replace("/", "+")
        git_dir = folder / "repo" if (folder / "repo").exists() else folder
        data = collect(source, git_dir)
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(
            f"{path.relative_to(ROOT)}: {len(data['cases'])} cases from {source.repo}@{data['commit'][:10]}"
        )


if __name__ == "__main__":
    main()
