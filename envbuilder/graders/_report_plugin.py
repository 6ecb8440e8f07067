"""A pytest plugin the repository grader puts in its grading container (read as text, never
imported by envbuilder): it reports each test's outcome on file descriptor 3 (which it takes
and closes), each line marked with a nonce only this plugin knows.

The nonce comes in a file (its path in ``ENVBUILDER_REPORT``) that the plugin reads and deletes
when pytest loads it, before any of the repository's code is imported, so a print of the code
under test cannot pass for a report line. (The code under test runs in pytest's own process:
a program that searches the runner's memory for the nonce is beyond what any in-process test
runner can stop; the grader's other defences are about what reaches the container at all.)
"""

import os


def _setup() -> tuple:
    path = os.environ.pop("ENVBUILDER_REPORT", "")
    nonce = ""
    try:
        with open(path) as f:
            nonce = f.read().strip()
        os.unlink(path)
    except OSError:
        pass
    try:  # the grader's channel: fd 3 (pytest's own output goes elsewhere); closed for the rest
        fd = os.dup(3)
        os.close(3)
    except OSError:
        fd = os.dup(1)
    out = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace")

    def say(*words: str) -> None:
        out.write("\n" + " ".join((nonce, *words)) + "\n")
        out.flush()

    return (say,)


(_say,) = _setup()
del _setup


def pytest_sessionstart(session):
    _say("start")


def pytest_runtest_logreport(report):
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        outcome = ("xpassed" if report.passed else "xfailed") if xfail else report.outcome
    elif report.failed:
        outcome = "error"
    elif report.when == "setup" and report.skipped:
        outcome = "xfailed" if xfail else "skipped"
    else:
        return
    _say(outcome, report.nodeid.replace("\n", " "))


def pytest_collectreport(report):
    if report.failed:
        _say("collect-error", report.nodeid.replace("\n", " "))


def pytest_sessionfinish(session, exitstatus):
    _say("finish", str(int(exitstatus)))
