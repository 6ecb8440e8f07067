"""The guard's verdicts: an answer's arithmetic, literals and SymPy calls pass; its attempts at
names, attributes, imports and the system do not; modules imported from files always pass."""

from __future__ import annotations

import os

import pytest

from envbuilder.isolation.processes._guard import guarded, verdict


def _code(source: str, mode: str = "eval") -> object:
    return compile(source, "<string>", mode)


@pytest.mark.parametrize(
    "source",
    [
        "(25 + 50) * 3 - 7",
        "Integer (53 )*Integer (58 )/Integer (53 )+Integer (53 )",  # what parse_expr makes of an answer
        "Symbol ('x' )**Integer (2 )+sqrt (Integer (2 ))",
        "Add (Symbol ('x' ),Mul (Integer (2 ),Symbol ('y' ),evaluate =False ),evaluate =False )",
        "[[1, 2], [3, 4]]",
        "['a', 'b']",
        "(lambda x: x + 1)(2)",
        "max(1, 2)",
    ],
)
def test_what_an_answer_is_passes(source: str) -> None:
    assert verdict("exec", (_code(source),)) is None


def test_parse_exprs_own_star_import_passes() -> None:
    assert verdict("exec", (_code("from sympy import *", "exec"),)) is None


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('id')",
        "exec('import os')",
        "eval('1')",
        "compile('1', 'x', 'eval')",
        "open('/etc/passwd').read()",
        "getattr(1, 'real')",
        "(1).__class__",
        "x.real",
        "Integer(1).evalf()",
        "globals()",
        "vars()",
        "lambdify(x, x)",
        "preview(x)",
        "[c for c in ().__class__.__bases__]",
        "(lambda: __builtins__)()",
        "_private",
        "type('X', (), {})",
    ],
)
def test_code_that_reaches_further_is_refused(source: str) -> None:
    assert verdict("exec", (_code(source),)) == "code"


@pytest.mark.parametrize(
    "source",
    ["import os", "from os import system", "from os import *", "import sympy.core", "global x\nx = 1"],
)
def test_statements_that_import_or_set_globals_are_refused(source: str) -> None:
    assert verdict("exec", (_code(source, "exec"),)) == "code"


def test_a_module_imported_from_a_file_passes() -> None:
    code = compile("import os\nos.getpid()\nx.__class__", "/usr/lib/python3/some_module.py", "exec")
    assert verdict("exec", (code,)) is None


@pytest.mark.parametrize(
    ("event", "args", "kind"),
    [
        ("import", ("ctypes", None, [], [], []), "import"),
        ("import", ("subprocess", None, [], [], []), "import"),
        ("import", ("socket", None, [], [], []), "import"),
        ("import", ("urllib.request", None, [], [], []), "import"),
        ("import", ("sympy.polys", None, [], [], []), None),
        ("open", ("/tmp/x", "w", 0), "file"),
        ("open", ("/tmp/x", "a", 0), "file"),
        ("open", ("/tmp/x", "r+", 0), "file"),
        ("open", ("/tmp/x", "xb", 0), "file"),
        ("open", ("/tmp/x", None, os.O_WRONLY | os.O_CREAT), "file"),
        ("open", ("/tmp/x", None, os.O_RDWR), "file"),
        ("open", ("/usr/lib/x.py", "r", 0), None),
        ("open", ("/usr/lib/x.py", None, os.O_RDONLY), None),
        ("os.system", ("id",), "process"),
        ("os.exec", ("/bin/sh", [], {}), "process"),
        ("os.posix_spawn", ("/bin/sh", [], {}), "process"),
        ("os.fork", (), "process"),
        ("os.kill", (1, 9), "process"),
        ("subprocess.Popen", ("sh", [], None, None), "process"),
        ("signal.pthread_kill", (1, 9), "process"),
        ("os.remove", ("/tmp/x", None), "file"),
        ("os.rename", ("/a", "/b", None, None), "file"),
        ("os.chmod", ("/a", 0o777, None), "file"),
        ("shutil.rmtree", ("/a", None), "file"),
        ("socket.connect", (None, ("127.0.0.1", 80)), "network"),
        ("socket.__new__", (None, 2, 1, 0), "network"),
        ("urllib.Request", ("http://x", None, {}, "GET"), "network"),
        ("ctypes.dlopen", ("libc.so.6",), "memory"),
        ("ctypes.addressof", (None,), "memory"),
        ("mmap.__new__", (-1, 10, 0, 0), "memory"),
        ("gc.get_objects", (None,), "introspection"),
        ("gc.get_referrers", ((),), "introspection"),
        ("sys.addaudithook", (), "introspection"),
        ("sys.settrace", (None,), "introspection"),
        ("sys._current_frames", (), "introspection"),
        ("builtins.input", ("?",), "introspection"),
        ("marshal.loads", (b"",), "code"),
        ("pickle.find_class", ("os", "system"), "code"),
        ("function.__new__", (None,), "code"),
        ("code.__new__", (None,), "code"),
        # What importing modules and logging raise passes.
        ("os.listdir", ("/usr/lib",), None),
        ("os.scandir", ("/usr/lib",), None),
        ("sys._getframe", (None,), None),
        ("sys.excepthook", (None, None, None, None), None),
        ("compile", (b"1", "<string>"), None),
        ("time.sleep", (0.1,), None),
        ("object.__setattr__", (int, "x", 1), None),
    ],
)
def test_events(event: str, args: tuple[object, ...], kind: str | None) -> None:
    assert verdict(event, args) == kind


def test_the_guard_is_armed_only_in_a_worker_child() -> None:
    with pytest.raises(RuntimeError, match="only in a worker"):
        guarded(int, "1")
