"""The row index of Parquet files, written by a child process.

The child is ``python -m envbuilder.data._rowindex PARENT OUT FILE...``.

Re-encoding millions of rows into 64-row batches is some 150,000 calls through pyarrow, each taking
the interpreter lock for its Python part: in a thread of the server, it fought the server's own
start (imports, the app) and its first requests for that lock, and a 10-million-row split made
the server ready several times later. A child process has its own interpreter: the server waits
for it without holding anything, and the child runs at a lower priority (``nice``) so the
server wins the CPU. It reads trusted files the operator serves and writes the index's file
(atomically); nothing comes back but its exit status and, on failure, the error's text. It ends
with its server: between row groups it checks that its parent is still the server that started
it (``PARENT``, that server's pid), so a server stopped or killed mid-build leaves no process
behind burning a core on an index nobody waits for.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["write_row_index"]


def write_row_index(out: Path, paths: list[Path]) -> None:
    """Write the row index of ``paths`` to ``out`` in a child process.

    Raises:
        OSError: the child failed (its last error line is in the message).
    """
    done = subprocess.run(
        [sys.executable, "-m", "envbuilder.data._rowindex", str(os.getpid()), str(out), *map(str, paths)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise OSError(f"the row index process failed: {lines[-1] if lines else f'exit {done.returncode}'}")


def _main(argv: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from envbuilder.data._ipc import write_ipc

    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)  # the server's requests win the CPU
    parent, out, *files = argv
    handles = [pq.ParquetFile(f, memory_map=False) for f in files]

    def row_groups() -> Iterator[pa.Table]:
        for pf in handles:
            for rg in range(pf.metadata.num_row_groups):
                if os.getppid() != int(parent):
                    sys.exit("the server that started this row index has gone")  # nothing written
                yield pf.read_row_group(rg, use_threads=False)

    # The schema of the first file, as the table that reads the index has (ParquetTable).
    write_ipc(Path(out), handles[0].schema_arrow, row_groups())


if __name__ == "__main__":
    _main(sys.argv[1:])
