"""Make tasks.jsonl from tomli's real history (run from this folder: python make_tasks.py REPO).

Each task is one bug-fix commit of tomli (https://github.com/hukkin/tomli, MIT licence, see
LICENSE): the base commit is its parent, the gold patch its change to `tomli/`, the hidden test
patch its change to `tests/`. FAIL_TO_PASS are the tests of the touched test files that fail at
the base with the test patch and pass with the fix too; PASS_TO_PASS those that pass at both.
`tomli.bundle` (the history up to the newest task) is the repository the spec serves.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

COMMITS = {
    "96dfe2c": "`tomli.TOMLDecodeError` reports its module as `tomli._parser`, an internal module. "
    "Code that prints or pickles the exception's type shows the private path. Make the exception "
    "report `tomli` as its module (`tomli.TOMLDecodeError().__module__ == \"tomli\"`).",
    "8d34a60": "Parsing a TOML document with an invalid date, such as `a = 2021-06-31` (June has 30 "
    "days), raises `ValueError` from the `datetime` module instead of `tomli.TOMLDecodeError`. "
    "Invalid dates and date-times must raise `TOMLDecodeError` like every other malformed document.",
    "653a1ef": "`tomli.loads('a = { b.c = 1, b = 2 }')` (an inline table that first defines `b` "
    "implicitly through a dotted key, then overwrites `b` with a value) raises the wrong exception "
    "type instead of `tomli.TOMLDecodeError`. Overwriting an implicitly defined table inside an "
    "inline table must raise `TOMLDecodeError`.",
    "1d591c9": "Inline tables nested in an inline table can be overwritten from the parent: "
    "`tomli.loads('a = { b = { c = 1 }, b.c = 2 }')` and the same through an inner array are "
    "accepted, but TOML forbids changing an inline table once defined. They must raise "
    "`tomli.TOMLDecodeError`.",
}


def git(repo, *args, stdin=None):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, input=stdin).stdout


def outcomes(repo, commit, patches, files):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(f"git -C {repo} archive {commit} | tar -x -C {tmp}", shell=True, check=True)
        for patch in patches:
            subprocess.run(["git", "apply"], cwd=tmp, input=patch, check=True)
        report = Path(tmp) / "report.json"
        plugin = Path(tmp) / "collect_outcomes.py"
        plugin.write_text(
            "import json\nresults={}\n"
            "def pytest_runtest_logreport(report):\n"
            "    if report.when=='call' or report.failed: results[report.nodeid]="
            "'passed' if report.passed and report.when=='call' else 'failed'\n"
            f"def pytest_sessionfinish(session):\n    open({str(report)!r},'w').write(json.dumps(results))\n"
        )
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "collect_outcomes", "-p", "no:cacheprovider", *files],
            cwd=tmp,
            capture_output=True,
            env={"PYTHONPATH": tmp, "PATH": "/usr/bin:/bin"},
        )
        return json.loads(report.read_text())


def main(repo):
    rows = []
    for commit, statement in COMMITS.items():
        full = git(repo, "rev-parse", commit).decode().strip()
        base = git(repo, "rev-parse", f"{commit}^").decode().strip()
        gold = git(repo, "diff", base, full, "--", "tomli").decode()
        tests = git(repo, "diff", base, full, "--", "tests").decode()
        files = sorted({line[6:] for line in tests.splitlines() if line.startswith("+++ b/tests/test_")})
        if not files:
            files = ["tests/test_extras.py"]
        before = outcomes(repo, base, [tests.encode()], files)
        after = outcomes(repo, base, [tests.encode(), gold.encode()], files)
        f2p = sorted(t for t, o in after.items() if o == "passed" and before.get(t) != "passed")
        p2p = sorted(t for t, o in after.items() if o == "passed" and before.get(t) == "passed")
        assert f2p, commit
        rows.append(
            {
                "instance_id": f"tomli-{commit}",
                "repo": "tomli",
                "base_commit": base,
                "problem_statement": statement,
                "patch": gold,
                "test_patch": tests,
                "FAIL_TO_PASS": f2p,
                "PASS_TO_PASS": p2p[:40],
            }
        )
        print(commit, len(f2p), len(p2p), file=sys.stderr)
    with open("tasks.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
