"""How often the graders give the right reward, on real benchmarks, through the ORS protocol.

    python bench/grader_accuracy.py [--shared ../shared] [--concurrency 16] [--out table.md]

Serves ``envs/math500.yaml``, ``envs/gsm8k.yaml``, ``envs/mmlu_stem.yaml`` and an AIME-style
integer environment (AIME 2024 answers such as ``025`` from ``../shared/data/aime24``, which is
test-only and never shipped, plus the integers 0-999 zero-padded) with ``envbuilder serve`` in
a subprocess, and submits every answer below on its own episode (create_session, create,
call ``submit``, delete) with :class:`envbuilder.client.AsyncClient`:

- every row's gold answer in each correct form: bare, in ``$…$``, in ``\\boxed{}``, as "The
  final answer is …", and harmless variations (spacing, ``\\dfrac``/``\\frac``,
  ``\\left``/``\\right``, a trailing full stop, a units word where the gold has units);
- wrong answers made from the gold: another row's answer, a changed number, a sign flip, a
  dropped factor.

The anchor, math-verify's ``verify(parse(gold), parse(answer))`` called directly on the same
answers in the same run (gold wrapped in ``$…$`` as its README advises), is scored alongside.
A correct form counts when the reward is 1.0; a wrong answer when it is 0 (ungradeable is
neither: it is reported on its own).

    python bench/grader_accuracy.py --card [--out table.md]

measures the grader fidelity card and writes ``envbuilder/graders/fidelity.json``: in process,
every peer table (``tests/graders/peers/*.json``: thirteen projects' own grader tests, collected by
``bench/peer_cases.py``) graded by each grader it measures (``math``; ``exact_match`` with
``extract: number``; ``choice``), false passes and false fails counted on the factual cases (the
conventions and wrong peer verdicts of ``tests/graders/peers/conventions.json`` left out), and
the shipped MATH-500, GSM8K and MMLU-STEM gold answers in every correct form and wrong answers
made from them, graded by each spec's own grader. It prints the tables of the docs' graders page
and math-verify called directly (its own helpers' settings) on the same math tables.
``--peers`` prints the peer tables' figures without writing the card.

    python bench/grader_accuracy.py --speed [--seconds 20]

times the ``math`` grader's check in one thread (one core) on MATH-500's gold answers in every
correct and wrong form: answers per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# `ENVBUILDER_ROOT=<an exported older tree>` measures that tree's graders (--speed, --peers), in
# this process and in the grading processes it starts (which import envbuilder afresh).
TREE = os.environ.get("ENVBUILDER_ROOT", str(ROOT))
sys.path.insert(0, TREE)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TREE, os.environ.get("PYTHONPATH")) if p)

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from envbuilder.client import AsyncClient  # noqa: E402


@dataclass
class Case:
    env: str
    split: str
    index: int
    form: str
    correct: bool
    """A correct form of the gold answer (must score 1.0), or a wrong answer (must score 0)."""
    answer: str
    gold: str
    """What the anchor compares with (the gold answer, or the option letter)."""
    reward: float | None = None
    ungradeable: bool = False
    anchor: bool | None = None
    """The anchor's verdict; None when it parsed nothing from the answer or the gold."""


# -- answer forms ------------------------------------------------------------------------------

_UNIT_GOLD = re.compile(
    r"^(?P<num>.*?)\s*(?:\\(?:text|mbox)\{\s*(?P<word>[a-z]+)\s*\}(?P<pow>\^\d)?|\^\\circ|\^\{\\circ\})$"
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def correct_forms(gold: str) -> dict[str, str]:
    """The gold answer written as a model might: every form must score 1.0."""
    forms = {
        "bare": gold,
        "$…$": f"${gold}$",
        "\\boxed{}": f"\\boxed{{{gold}}}",
        "final answer is": f"The final answer is ${gold}$.",
        "trailing period": f"{gold}.",
    }
    spaced = (
        re.sub(r"\s+", "", gold)
        if " " in gold
        else re.sub(r"([=+<>]|(?<!\d),|,(?!\d{3}|\\!)|\\cup)", r" \1 ", gold)
    )
    if "\\text" not in gold and "\\mbox" not in gold and spaced != gold:
        forms["spacing"] = spaced
    if "\\frac" in gold or "\\dfrac" in gold:
        forms["\\dfrac/\\frac"] = (
            gold.replace("\\dfrac", "\\frac") if "\\dfrac" in gold else gold.replace("\\frac", "\\dfrac")
        )
    if "\\left" in gold:
        forms["\\left/\\right"] = re.sub(r"\\(?:left|right)\s*", "", gold)
    elif re.search(r"[()\[\]]", gold) and "\\begin" not in gold:
        lr = re.sub(r"(?<!\\)([(\[])", r"\\left\1", gold)
        forms["\\left/\\right"] = re.sub(r"(?<!\\)([)\]])", r"\\right\1", lr)
    units = _UNIT_GOLD.match(gold)
    if gold.startswith("\\$"):
        forms["units word"] = f"{gold[2:]} dollars"
    elif units and units.group("num"):
        word = units.group("word") or "degrees"
        power = {"^2": " squared", "^3": " cubed"}.get(units.group("pow") or "", "")
        forms["units word"] = f"{units.group('num')} {word}{power}"
    return forms


def wrong_forms(gold: str, other: str) -> dict[str, str]:
    """Answers made from the gold that must score 0."""
    out = {"another row's answer": other}
    units = _UNIT_GOLD.match(gold)
    value = units.group("num") if units and units.group("num") else gold  # not the unit's power
    numbers = [m for m in _NUMBER.finditer(value) if float(m.group()) != 0]
    if numbers:
        m = numbers[-1]
        text = m.group()
        changed = str(int(text) + 1) if text.isdigit() else f"{float(text) + 1:g}"
        out["changed number"] = gold[: m.start()] + changed + gold[m.end() :]
    flipped = _sign_flip(gold)
    if flipped is not None:
        out["sign flip"] = flipped
    dropped = _drop_factor(gold)
    if dropped is not None:
        out["dropped factor"] = dropped
    return out


def _sign_flip(gold: str) -> str | None:
    """The gold with its sign (or its first element's sign) flipped; None when unsafe."""
    if "\\pm" in gold or _zero(gold):
        return None
    if gold.startswith("-"):
        return gold[1:]
    if re.match(r"[\d.]|\\(?:d?frac|sqrt|pi)(?![a-zA-Z])", gold):
        return "-" + gold
    if not re.search(r",|\\cup|\\begin|\\text|\\mbox|=|<|>|_", gold):
        return f"-({gold})"
    # A tuple, interval or matrix: flip the first non-zero number that starts an element.
    for m in re.finditer(r"(?:[(\[,&]|\\\\)\s*(-?)(\d+(?:\.\d+)?)", gold):
        if float(m.group(2)) == 0:
            continue
        sign = "" if m.group(1) else "-"
        start = m.start(1)
        return gold[:start] + sign + gold[m.end(1) :]
    return None


def _zero(gold: str) -> bool:
    return re.fullmatch(r"-?0*\.?0*", gold.strip()) is not None


def _drop_factor(gold: str) -> str | None:
    m = re.fullmatch(r"(-?\d+)\s*(\\sqrt\{[^{}]+\}|\\pi|[a-zA-Z](?:\^\d)?)", gold)
    if m:
        return m.group(2)
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\\(sqrt\{[^{}]+\}|pi)\}\{(\d+)\}", gold)
    if m:
        return f"{m.group(1)}\\frac{{{m.group(2)}}}{{{m.group(4)}}}"
    m = re.fullmatch(r"(-?\d+)\\(sqrt\{[^{}]+\}|pi)", gold)
    if m:
        return m.group(1)
    return None


def _plain(gold: str) -> str:
    return re.sub(r"\s|\\[!,]|\^\\circ|\\\$|\\left|\\right|\\text\{[^}]*\}|(?<=\\)d(?=frac)", "", gold)


def _other(golds: list[str], index: int, rng: random.Random) -> str:
    """Another row's answer, written differently from this row's (so not the same answer)."""
    mine = _plain(golds[index])
    while True:
        other = golds[rng.randrange(len(golds))]
        if _plain(other) != mine:
            return other


def math500_cases(rows: list[dict[str, Any]], rng: random.Random) -> Iterator[Case]:
    golds = [r["answer"] for r in rows]
    for i, gold in enumerate(golds):
        for form, answer in correct_forms(gold).items():
            yield Case("math500", "test", i, form, True, answer, gold)
        for form, answer in wrong_forms(gold, _other(golds, i, rng)).items():
            yield Case("math500", "test", i, form, False, answer, gold)


def gsm8k_cases(rows: list[dict[str, Any]], rng: random.Random) -> Iterator[Case]:
    golds = [r["answer"].split("####")[-1].strip() for r in rows]
    for i, gold in enumerate(golds):
        value = int(gold.replace(",", ""))
        forms = {
            "bare": gold,
            "$…$": f"${gold}$",
            "\\boxed{}": f"\\boxed{{{gold}}}",
            "final answer is": f"The final answer is {gold}.",
            "#### n": f"Adding it up gives the total.\n#### {gold}",
            "thousands separator": f"{value:,}",
            "n.00": f"{value}.00",
            "units word": f"{gold} dollars",
            "\\$n": f"\\${gold}",
        }
        for form, answer in forms.items():
            yield Case("gsm8k", "test", i, form, True, answer, gold)
        wrong = {
            "another row's answer": _other(golds, i, rng),
            "changed number": str(value + 1),
        }
        if value != 0:
            wrong["sign flip"] = str(-value)
        for form, answer in wrong.items():
            yield Case("gsm8k", "test", i, form, False, answer, gold)


def mmlu_cases(rows: list[dict[str, Any]], rng: random.Random) -> Iterator[Case]:
    for i, row in enumerate(rows):
        letter = "ABCD"[row["answer"]]
        option = row["choices"][row["answer"]]
        forms = {
            "bare": letter,
            "(X)": f"({letter})",
            "\\boxed{}": f"\\boxed{{{letter}}}",
            "final answer is": f"The final answer is ({letter}).",
            "lower case": letter.lower(),
            "X) option": f"{letter}) {option}",
            "option text": option,
        }
        folded = [" ".join(str(c).lower().split()) for c in row["choices"]]
        if folded.count(" ".join(option.lower().split())) > 1 or len(option.strip()) == 1:
            del forms["option text"]  # two options with one text, or a text that is a letter
        for form, answer in forms.items():
            yield Case("mmlu_stem", "test", i, form, True, answer, letter)
        wrong_letter = rng.choice([x for x in "ABCD" if x != letter])
        for form, answer in {
            "another letter": wrong_letter,
            "\\boxed{other}": f"\\boxed{{{wrong_letter}}}",
        }.items():
            yield Case("mmlu_stem", "test", i, form, False, answer, letter)


def integer_cases(golds: list[str], rng: random.Random) -> Iterator[Case]:
    for i, gold in enumerate(golds):
        value = int(gold)
        forms = {
            "as given (025)": gold,
            "no leading zeros": str(value),
            "$…$": f"${value}$",
            "\\boxed{}": f"\\boxed{{{value}}}",
            "\\boxed{025}": f"\\boxed{{{gold}}}",
            "final answer is": f"The final answer is {value}.",
        }
        for form, answer in forms.items():
            yield Case("integers", "test", i, form, True, answer, gold)
        wrong = {"changed number": f"{value + 1:03d}", "another row's answer": _other(golds, i, rng)}
        for form, answer in wrong.items():
            yield Case("integers", "test", i, form, False, answer, gold)


# -- serving and submitting --------------------------------------------------------------------

INTEGERS_SPEC = """\
name: integers
dataset:
  type: parquet
  files: {test: integers.parquet}
splits:
  test: {type: test}
prompt:
  template: "{{ problem }}"
submit:
  description: Submit the final answer (an integer from 0 to 999).
grader:
  type: math
  target: "{{ answer }}"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(specs: list[Path], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "envbuilder", "serve", *map(str, specs), "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--strict"], stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"envbuilder serve exited:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("envbuilder serve did not start within 120 s")


async def submit_all(
    base_url: str, cases: list[Case], concurrency: int, progress: Callable[[], None]
) -> None:
    """One episode per answer, in the fewest ORS requests a client may send: create_session,
    create, call ``submit``, delete (the session-level pings are skipped: each episode lasts
    milliseconds). The client's own HTTP layer parses the SSE results."""
    gate = asyncio.Semaphore(concurrency)
    async with AsyncClient(base_url, timeout=120) as client:
        http = client.http

        async def one(case: Case) -> None:
            async with gate:
                minted = await http.stream("/create_session", {}, resumable=False)
                sid = str(minted.task_id)
                body = {"split": case.split, "index": case.index, "env_name": case.env}
                await http.request("POST", "/create", json=body, sid=sid)
                try:
                    call = {"name": "submit", "input": {"answer": case.answer}}
                    result = (await http.stream(f"/{case.env}/call", call, sid=sid)).result
                finally:
                    await http.request("POST", "/delete", sid=sid, session_route=True)
                output = result["output"]
                case.reward = output.get("reward")
                case.ungradeable = (output.get("metadata") or {}).get("outcome") == "ungradeable"
                progress()

        await asyncio.gather(*(one(c) for c in cases))


def _client(job: tuple[str, list[Case], int]) -> list[tuple[float | None, bool]]:
    """One client process: submit its slice of the cases to its server."""
    url, cases, concurrency = job
    asyncio.run(submit_all(url, cases, concurrency, lambda: None))
    return [(c.reward, c.ungradeable) for c in cases]


def submit_everywhere(urls: list[str], cases: list[Case], clients: int, concurrency: int) -> None:
    """Split the cases over ``clients`` processes, each bound to one of the servers."""
    slices = [cases[i::clients] for i in range(clients)]
    jobs = [(urls[i % len(urls)], part, concurrency) for i, part in enumerate(slices)]
    with ProcessPoolExecutor(clients) as pool:
        for part, results in zip(slices, pool.map(_client, jobs), strict=True):
            for case, (reward, ungradeable) in zip(part, results, strict=True):
                case.reward, case.ungradeable = reward, ungradeable


# -- the anchor --------------------------------------------------------------------------------


def _anchor_one(item: tuple[str, str, str]) -> bool | None:
    kind, gold, answer = item
    import math_verify as mv

    if kind == "letter":
        config = [mv.StringExtractionConfig(strings=("A", "B", "C", "D"))]
        g = mv.parse(gold, config, parsing_timeout=None)
        p = mv.parse(answer, config, parsing_timeout=None)
    else:
        g = mv.parse(f"${gold}$", parsing_timeout=None)
        p = mv.parse(answer, parsing_timeout=None)
    if not g or not p:
        return None
    return bool(mv.verify(g, p, timeout_seconds=None))


def _anchor_chunk(items: list[tuple[str, str, str]]) -> list[bool | None]:
    import logging

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    import math_verify.parser as mvp

    mvp.TIMEOUT_WARNING_SHOWN = True
    return [_anchor_one(item) for item in items]


def start_anchor(cases: list[Case], pool: ProcessPoolExecutor, workers: int) -> Iterator[list[bool | None]]:
    """Queue the anchor's work on ``pool`` now (it runs while the answers are submitted)."""
    items = [("letter" if c.env == "mmlu_stem" else "math", c.gold, c.answer) for c in cases]
    size = max(1, len(items) // (workers * 8))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    return pool.map(_anchor_chunk, chunks)


# -- the table ---------------------------------------------------------------------------------


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}" if d else "–"


def table(cases: list[Case]) -> str:
    groups: dict[tuple[str, bool, str], list[Case]] = defaultdict(list)
    for c in cases:
        groups[(c.env, c.correct, c.form)].append(c)
    lines = [
        "| environment | answers | form | rows | envbuilder right % | envbuilder ungradeable % "
        "| math-verify right % | math-verify unparsed % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    totals: dict[tuple[str, bool], list[Case]] = defaultdict(list)
    for (env, correct, form), group in groups.items():
        totals[(env, correct)].extend(group)
        lines.append(_line(env, correct, form, group))
    lines.append("| | | | | | | | |")
    for (env, correct), group in totals.items():
        lines.append(_line(env, correct, "**all forms**", group))
    return "\n".join(lines)


def _right(c: Case) -> bool:
    if c.correct:
        return c.reward is not None and c.reward >= 1.0
    return c.reward is not None and c.reward <= 0.0


def _anchor_right(c: Case) -> bool:
    return c.anchor is True if c.correct else c.anchor is False


def _line(env: str, correct: bool, form: str, group: list[Case]) -> str:
    n = len(group)
    kind = "correct → 1.0" if correct else "wrong → 0"
    return (
        f"| {env} | {kind} | {form} | {n:,} | {_pct(sum(map(_right, group)), n)} "
        f"| {_pct(sum(c.ungradeable for c in group), n)} | {_pct(sum(map(_anchor_right, group)), n)} "
        f"| {_pct(sum(c.anchor is None for c in group), n)} |"
    )


def failures(cases: list[Case], limit: int) -> str:
    bad = [c for c in cases if not _right(c)]
    lines = [f"{len(bad)} answers not scored as expected (first {min(limit, len(bad))}):"]
    for c in bad[:limit]:
        lines.append(f"  {c.env}[{c.index}] {c.form}: gold {c.gold!r} answer {c.answer!r} → {c.reward}")
    return "\n".join(lines)


# -- the peers' own test tables, and speed --------------------------------------------------------


def _mv_direct(gold: str, answer: str, places: int) -> bool:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    try:
        return bool(verify(parse(gold, configs), parse(answer, configs), float_rounding=places))
    except Exception:
        return False


def _from_checkout(name: str, path: str) -> Any:
    """The module at ``path`` in this checkout, also when ``ENVBUILDER_ROOT`` names an older
    tree to grade with (``tests/graders/peer_tables.py``: the tables and their exceptions;
    ``envbuilder/graders/_fidelity.py``: the card's tables)."""
    import importlib.util

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        assert spec is not None and spec.loader is not None
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def _peer_tables() -> Any:
    return _from_checkout("peer_tables", "tests/graders/peer_tables.py")


async def peer_card() -> dict[str, Any]:
    """Every peer table graded by each grader it measures (``tests/graders/peer_tables.py``):
    per grader, each table's rates and the total over them."""
    peer_tables = _peer_tables()
    built: dict[tuple[str, int], Any] = {}
    out: dict[str, Any] = {}
    for grader in peer_tables.CONFIGS:
        tables, total = [], peer_tables.Tally()
        for name, mine in peer_tables.measured(grader):
            tally = await peer_tables.grade_table(built, grader, mine)
            data = peer_tables.table(name)
            about = {k: data[k] for k in ("repo", "commit", "license")}
            tables.append({"table": name, **about, **tally.rates()})
            total.absorb(tally)
        out[grader] = {"tables": tables, "total": total.rates()}
    return out


def mv_agreement() -> str:
    """math-verify called directly (its own helpers' settings) on the math tables: how often it
    agrees with each peer, for comparison."""
    peer_tables = _peer_tables()

    lines = ["| table | cases | math-verify called directly agrees |", "|---|---|---|"]
    for name, mine in peer_tables.measured("math"):
        agree = sum(_mv_direct(c.gold, c.answer, c.options.get("precision", 6)) == c.expected for c in mine)
        lines.append(f"| {name} | {len(mine)} | {_pct(agree, len(mine))} % |")
    return "\n".join(lines)


#: The shipped benchmarks each card grader is measured on: (grader, benchmark, spec, cases).
BENCHMARKS: list[tuple[str, str, str, Callable[[list[dict[str, Any]], random.Random], Iterator[Case]]]] = [
    ("math", "MATH-500", "math500", math500_cases),
    ("exact_match", "GSM8K test", "gsm8k", gsm8k_cases),
    ("choice", "MMLU-STEM", "mmlu_stem", mmlu_cases),
]


async def benchmark_card() -> dict[str, list[dict[str, Any]]]:
    """The shipped benchmarks' gold answers in each correct form and wrong answers made from
    them (the forms of the ORS run above), graded in process by each spec's own grader."""
    from envbuilder.environment import load_environment
    from envbuilder.graders import GraderContext, build_grader

    out: dict[str, list[dict[str, Any]]] = {}
    for key, name, spec, make_cases in BENCHMARKS:
        env = load_environment(ROOT / "envs" / f"{spec}.yaml")
        grader = build_grader(env.spec.grader, GraderContext(base_dir=env.loaded.base_dir))
        rows = _rows(ROOT / "envs" / "data" / spec)
        cases = list(make_cases(rows, random.Random(0)))
        for case in cases:
            result = await grader.grade(case.answer, rows[case.index], {})
            case.reward, case.ungradeable = result.score, result.outcome.value == "ungradeable"
        correct = [c for c in cases if c.correct]
        wrong = [c for c in cases if not c.correct]
        fails = sum(not _right(c) for c in correct)
        passes = sum(not _right(c) for c in wrong)
        out.setdefault(key, []).append(
            {
                "benchmark": name,
                "spec": f"envs/{spec}.yaml",
                "correct": len(correct),
                "false_fails": fails,
                "false_fail_rate": round(fails / len(correct), 4),
                "wrong": len(wrong),
                "false_passes": passes,
                "false_pass_rate": round(passes / len(wrong), 4),
                "ungradeable": sum(c.ungradeable for c in cases),
            }
        )
        await grader.aclose()
    return out


CARD = ROOT / "envbuilder" / "graders" / "fidelity.json"


async def measure_card() -> dict[str, Any]:
    peers, benchmarks = await peer_card(), await benchmark_card()
    return {
        "about": (
            "The grader fidelity card (envbuilder/graders/_fidelity.py): per grader, false-pass and "
            "false-fail rates on other projects' own test tables (factual cases only; tests/graders/"
            "peers/) and on the shipped benchmarks' gold and perturbed answers."
        ),
        "measured_by": "python bench/grader_accuracy.py --card",
        "graders": {key: {"peers": peers[key], "benchmarks": benchmarks.get(key, [])} for key in peers},
    }


def speed(seconds: float) -> str:
    from pydantic import TypeAdapter

    from envbuilder.graders import GraderContext, build_grader
    from envbuilder.spec._models import GraderField

    grader = build_grader(
        TypeAdapter(GraderField).validate_python({"type": "math", "target": "{{ answer }}"}), GraderContext()
    )
    rng = random.Random(0)
    pairs = [(c.answer, c.gold) for c in math500_cases(_rows(ROOT / "envs/data/math500"), rng)]
    for answer, gold in pairs[:50]:
        grader._check(answer, gold)  # warm SymPy's caches as a long-running server has them
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for answer, gold in pairs:
            grader._check(answer, gold)
            done += 1
            if time.perf_counter() - started >= seconds:
                break
    elapsed = time.perf_counter() - started
    return (
        f"{done:,} MATH-500 answers checked in {elapsed:.1f} s on one thread: {done / elapsed:,.0f} answers/s"
    )


def main() -> None:
    if {"--peers", "--card", "--speed"} & set(sys.argv):
        quick = argparse.ArgumentParser(description="The grader fidelity card and the math grader's speed.")
        quick.add_argument("--peers", action="store_true", help="the peer tables' figures (no file written)")
        quick.add_argument("--card", action="store_true", help=f"measure the card and write {CARD.name}")
        quick.add_argument("--speed", action="store_true")
        quick.add_argument("--seconds", type=float, default=20.0)
        quick.add_argument("--out", type=Path, default=None)
        args = quick.parse_args()
        parts = []
        if args.card:
            measured = asyncio.run(measure_card())
            CARD.write_text(json.dumps(measured, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            parts.append(f"{CARD.relative_to(ROOT)} written")
        elif args.peers:
            measured = {
                "graders": {k: {"peers": v, "benchmarks": []} for k, v in asyncio.run(peer_card()).items()}
            }
        if args.card or args.peers:
            fidelity = _from_checkout("fidelity_card", "envbuilder/graders/_fidelity.py")
            parts += [fidelity.markdown_table(measured), fidelity.tables_markdown(measured), mv_agreement()]
        if args.speed:
            parts.append(speed(args.seconds))
        text = "\n\n".join(parts)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # ../shared beside the checkout (a worktree in wt/ finds it one level further up).
    shared = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared").is_dir()), None)
    parser.add_argument("--shared", type=Path, default=shared, required=shared is None)
    parser.add_argument("--servers", type=int, default=2, help="`envbuilder serve` processes")
    parser.add_argument("--clients", type=int, default=2, help="client processes")
    parser.add_argument("--concurrency", type=int, default=32, help="episodes in flight per client")
    parser.add_argument("--anchor-workers", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="environments to run (default: all)")
    parser.add_argument("--show-failures", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()

    rng = random.Random(0)
    data = args.shared / "data"
    cases: list[Case] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        aime = pq.read_table(data / "aime24" / "test-00000-of-00001.parquet").to_pylist()
        integers = [str(r["answer"]).strip() for r in aime] + [f"{n:03d}" for n in range(1000)]
        pq.write_table(
            pa.table({"problem": [f"Problem {i}" for i in range(len(integers))], "answer": integers}),
            work / "integers.parquet",
        )
        (work / "integers.yaml").write_text(INTEGERS_SPEC)
        plan = {
            "math500": (
                ROOT / "envs" / "math500.yaml",
                lambda: math500_cases(_rows(ROOT / "envs/data/math500"), rng),
            ),
            "gsm8k": (
                ROOT / "envs" / "gsm8k.yaml",
                lambda: gsm8k_cases(_rows(ROOT / "envs/data/gsm8k"), rng),
            ),
            "mmlu_stem": (
                ROOT / "envs" / "mmlu_stem.yaml",
                lambda: mmlu_cases(_rows(ROOT / "envs/data/mmlu_stem"), rng),
            ),
            "integers": (work / "integers.yaml", lambda: integer_cases(integers, rng)),
        }
        chosen = {k: v for k, v in plan.items() if args.only is None or k in args.only}
        for _, make in chosen.values():
            cases.extend(make())
        specs = [spec for spec, _ in chosen.values()]
        servers = [serve(specs, work / f"serve-{i}.log") for i in range(args.servers)]
        anchor_pool = ProcessPoolExecutor(args.anchor_workers)
        started = time.perf_counter()
        anchored = start_anchor(cases, anchor_pool, args.anchor_workers)
        try:
            submit_everywhere([url for _, url in servers], cases, args.clients, args.concurrency)
            served = time.perf_counter() - started
        finally:
            for proc, _ in servers:
                proc.terminate()
                proc.wait(10)
    verdicts = [v for chunk in anchored for v in chunk]
    anchor_pool.shutdown()
    for case, verdict in zip(cases, verdicts, strict=True):
        case.anchor = verdict
    total = time.perf_counter() - started
    out = table(cases)
    header = (
        f"{len(cases):,} answers submitted through ORS in {served:.0f} s ({args.servers} servers, "
        f"{args.clients} client processes x {args.concurrency} episodes in flight); with the anchor "
        f"alongside, {total:.0f} s in all."
    )
    print(header)
    print(out)
    print(failures(cases, args.show_failures), file=sys.stderr)
    if args.out:
        args.out.write_text(f"{header}\n\n{out}\n")


def _rows(folder: Path) -> list[dict[str, Any]]:
    return pq.read_table(folder / "test-00000-of-00001.parquet").to_pylist()


if __name__ == "__main__":
    main()
