"""The limits of one sandboxed run and what became of it."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from pydantic import Field

from envbuilder.plugins import ConfigModel


class Limits(ConfigModel):
    """What one run may use; exceeding any of them ends the run and says which."""

    wall_seconds: float = Field(default=10.0, gt=0, le=600)
    """Real time before the run is killed (`timeout`)."""
    cpu_seconds: float = Field(default=10.0, gt=0, le=600)
    """CPU time of each process before it is killed (`cpu_time`)."""
    memory_mb: int = Field(default=512, ge=16, le=65_536)
    """Address space of each process, in MiB (`memory`)."""
    processes: int = Field(default=32, ge=1, le=4096)
    """Processes and threads the run may have at once (`processes`)."""
    output_kb: int = Field(default=64, ge=1, le=16_384)
    """Bytes of stdout plus stderr kept, in KiB; more kills the run (`output_limit`)."""
    disk_mb: int = Field(default=16, ge=1, le=4096)
    """Size of the writable working directory and of `/tmp`, in MiB; also the largest file."""

    @property
    def cpu_rlimit(self) -> int:
        """Whole seconds for RLIMIT_CPU (rounded up: the rlimit has one-second steps)."""
        return max(1, math.ceil(self.cpu_seconds))

    @property
    def output_bytes(self) -> int:
        return self.output_kb * 1024


class Status(enum.StrEnum):
    """How a run ended."""

    OK = "ok"
    """Exited with status 0."""
    EXIT = "exit"
    """Exited with another status or was killed by a signal of its own making."""
    TIMEOUT = "timeout"
    """Ran past ``wall_seconds`` and was killed."""
    CPU_TIME = "cpu_time"
    """Used ``cpu_seconds`` of CPU and was killed by the kernel."""
    MEMORY = "memory"
    """Ran out of its address space (the program reported an allocation failure)."""
    PROCESSES = "processes"
    """Could not start a process or thread: the ``processes`` limit."""
    OUTPUT_LIMIT = "output_limit"
    """Wrote more than ``output_kb`` and was killed."""


# Messages a runtime prints when an rlimit bites, mapped to the limit. A heuristic on the
# program's own last words: the kernel says nothing when malloc or fork fails.
_LIMIT_MARKERS = (
    ("MemoryError", Status.MEMORY),
    ("Cannot allocate memory", Status.MEMORY),
    ("std::bad_alloc", Status.MEMORY),
    ("out of memory", Status.MEMORY),
    ("Resource temporarily unavailable", Status.PROCESSES),
    ("can't start new thread", Status.PROCESSES),
)
_SIGXCPU = 24


@dataclass(frozen=True)
class RunResult:
    """The outcome of one sandboxed run."""

    status: Status
    exit_code: int | None
    """The exit status; for a signal, 128 + its number (as a shell shows it); None if killed by us."""
    stdout: str
    stderr: str
    seconds: float
    """Wall time of the run, sandbox start-up included."""
    oom_killed: bool = False
    """The kernel's OOM killer ended a process of the run (a container backend counts its memory
    cgroup's kills once the code's processes are gone; bubblewrap bounds each process's memory
    with RLIMIT_AS instead, so it has none)."""

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def last_error_line(self, limit: int = 200) -> str:
        """The last non-empty line of stderr (a traceback's summary), cut to ``limit`` characters."""
        for line in reversed(self.stderr.splitlines()):
            if line.strip():
                line = line.strip()
                return line if len(line) <= limit else line[: limit - 1] + "…"
        return ""

    def describe(self) -> str:
        """One line saying how the run ended, for a grade's reason."""
        if self.status is Status.OK:
            return "the program ran to completion"
        if self.status is Status.TIMEOUT:
            return f"timeout: the program ran for over {self.seconds:.3g} s and was killed"
        if self.status is Status.OUTPUT_LIMIT:
            return "output limit: the program wrote too much output and was killed"
        if self.status is Status.CPU_TIME:
            return "cpu time limit: the program used its CPU time and was killed"
        last = self.last_error_line()
        tail = f": {last}" if last else ""
        if self.status is Status.MEMORY:
            return f"memory limit: the program ran out of memory{tail}"
        if self.status is Status.PROCESSES:
            return f"process limit: the program could not start another process{tail}"
        return f"the program failed (exit status {self.exit_code}){tail}"

    def to_dict(self, tail: int = 2000) -> dict[str, object]:
        """A JSON-ready summary; stdout and stderr cut to their last ``tail`` characters."""
        return {
            "status": self.status.value,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "stdout": self.stdout[-tail:],
            "stderr": self.stderr[-tail:],
        }


def classify(exit_code: int, stderr: str) -> Status:
    """The status of a run that ended by itself with ``exit_code`` (128 + signal for a signal)."""
    if exit_code == 0:
        return Status.OK
    if exit_code == 128 + _SIGXCPU:  # RLIMIT_CPU's soft limit (the hard one, a second on, kills)
        return Status.CPU_TIME
    tail = stderr[-2000:]
    for marker, status in _LIMIT_MARKERS:
        if marker in tail:
            return status
    return Status.EXIT
