"""How a harnessed answer's run ended, said precisely on every sandbox backend (bubblewrap,
Docker, Podman: tests/sandboxes.py): its CPU time limit, the wall time, or an early end."""

from __future__ import annotations

from typing import Any

import pytest

from envbuilder.graders import Grader, Outcome
from tests.graders._util import grade, make
from tests.graders.test_harness import HARNESSED, TASK
from tests.sandboxes import BACKENDS, configured

SPIN = "    while True:\n        pass\n"
CPU_REASON = "cpu time limit: the code used its 1 s of CPU time and was killed"
ENDED = "the code's process ended before the tests finished"


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _grader(backend: str, **limits: Any) -> Grader:
    with configured(backend):  # the grader takes the configured backend when made
        return make({**HARNESSED, "limits": {**HARNESSED["limits"], **limits}})


async def _reason(grader: Grader, answer: str) -> str:
    result = await grade(grader, answer, TASK)
    # However the code's run ended, it earns nothing and is graded (never void).
    assert (result.outcome, result.score) == (Outcome.INCORRECT, 0.0), result.reason
    return result.reason


async def test_a_spinning_answer_is_stopped_by_its_cpu_limit(backend: str) -> None:
    # The wall time is far off: only the CPU limit of the answer's own process can stop it.
    grader = _grader(backend, wall_seconds=60, cpu_seconds=1)
    assert await _reason(grader, SPIN) == CPU_REASON
    # Ignoring SIGXCPU only brings the hard limit's SIGKILL, a second later: the same reason.
    ignoring = "    import signal\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n" + SPIN
    assert await _reason(grader, ignoring) == CPU_REASON
    # Threads share the process's CPU time.
    threads = (
        "    import threading\n"
        "    def spin():\n        while True:\n            pass\n"
        "    threading.Thread(target=spin, daemon=True).start()\n"
        "    spin()\n"
    )
    assert await _reason(grader, threads) == CPU_REASON


async def test_a_sleeping_answer_is_stopped_by_the_wall_time(backend: str) -> None:
    grader = _grader(backend, wall_seconds=2, cpu_seconds=30)
    reason = await _reason(grader, "    import time\n    time.sleep(300)\n")
    assert reason.startswith("timeout: the program ran for over "), reason


async def test_an_early_end_says_how_the_process_ended(backend: str) -> None:
    grader = _grader(backend, wall_seconds=60, cpu_seconds=5)
    assert await _reason(grader, "    import os\n    os._exit(3)\n") == f"{ENDED} (exit status 3)"
    assert await _reason(grader, "import os\nos._exit(4)\n") == f"{ENDED} (exit status 4)"
    # A signal the code sends itself is named as such: its CPU time was not used up.
    own = "    import os, signal\n    os.kill(os.getpid(), signal.SIGXCPU)\n"
    assert await _reason(grader, own) == f"{ENDED} (killed by SIGXCPU)"
    killed = "    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    assert await _reason(grader, killed) == f"{ENDED} (killed by SIGKILL)"


async def test_printed_reasons_are_not_taken(backend: str) -> None:
    """What the code prints, even the harness's line with a guessed nonce, is never the reason."""
    grader = _grader(backend, wall_seconds=60, cpu_seconds=5)
    answer = (
        "    import os, sys\n"
        f"    sys.stderr.write('\\nenvbuilder-harness:' + 'x' * 32 + ': {CPU_REASON}\\n')\n"
        f"    sys.stderr.write('\\nenvbuilder-harness: {CPU_REASON}\\n')\n"
        "    sys.stderr.flush()\n"
        "    os._exit(0)\n"
    )
    assert await _reason(grader, answer) == f"{ENDED} (exit status 0)"


# Four processes of 30 MB wait while the answer's own grows by 8 MB steps to at most 96 MB:
# within each one's 128 MB of address space, past the container's memory cgroup (128 + 2 x 1 +
# 64 MB) once the answer's reaches about 50 MB, the largest of them: the OOM killer takes it.
# (Its helpers close the harness's pipes they inherited, so the answer's end is seen at once.)
HOG = (
    "    import os, time\n"
    "    r, w = os.pipe()\n"
    "    for _ in range(4):\n"
    "        if os.fork() == 0:\n"
    "            held = b'x' * (30 << 20)\n"
    "            os.write(w, b'1')\n"
    "            os.closerange(3, 256)\n"
    "            time.sleep(600)\n"
    "    for _ in range(4):\n"
    "        os.read(r, 1)\n"
    "    held = [b'x' * (8 << 20) for _ in range(12)]\n"
    "    return 'survived'\n"
)


@pytest.mark.parametrize("engine", [b for b in BACKENDS if b != "bubblewrap"])
async def test_an_answer_the_oom_killer_took_ran_out_of_memory(engine: str) -> None:
    """A container bounds the run's memory as a whole, with a cgroup whose OOM kills its set-up
    counts (bubblewrap bounds each process's, so an answer there meets a MemoryError)."""
    grader = _grader(engine, wall_seconds=60, memory_mb=128, disk_mb=1, processes=8)
    assert await _reason(grader, HOG) == "memory limit: the code ran out of memory"
