"""Load many environments at once (folders of specs, spec files, packs), collecting failures."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from envbuilder.catalog._pack import is_pack, load_pack
from envbuilder.environment import Environment, load_environment
from envbuilder.errors import EnvbuilderError, Problem, SpecError

__all__ = ["Collection", "LoadFailure", "find_specs", "load_environments"]

SPEC_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LoadFailure:
    """A spec or pack that did not load, with why."""

    path: Path
    error: EnvbuilderError

    def __str__(self) -> str:
        text = str(self.error)
        if isinstance(self.error, SpecError) or "\n" in text:  # located lines, one per problem
            return f"{self.path} was not loaded:\n{text}"
        return f"{self.path} was not loaded: {text}"


@dataclass
class Collection:
    """The environments that loaded (in order), where each came from, and the failures."""

    envs: list[Environment] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)
    """Environment name → the spec or pack it was loaded from."""
    failures: list[LoadFailure] = field(default_factory=list)


def find_specs(paths: Iterable[Path]) -> list[Path]:
    """Expand folders into their top-level ``*.yaml``/``*.yml`` files (sorted); keep other paths."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file()))
        else:
            out.append(path)
    return out


def load_environments(
    paths: Iterable[Path],
    *,
    cache_dir: Path | None = None,
    trust_code: bool = False,
    signed: Iterable[Path] = (),
) -> Collection:
    """Load every spec and pack under ``paths``; a failure is recorded and the rest still load.

    A spec's own code (``function``, ``mcp``) runs when it lies in the user's own folders, a
    pack's only when it is among ``signed`` (its lock's signature verified with a trusted key);
    ``trust_code`` lets every one run it (``--trust-code``).

    Raises:
        SpecError: two environments share a name (located at the second one's ``name:``), or
            a folder holds no spec.
    """
    paths = list(paths)
    empty = [p for p in paths if p.is_dir() and not find_specs([p])]
    if empty:
        raise SpecError(
            [
                Problem(
                    code="no_specs",
                    message="the folder holds no *.yaml or *.yml spec",
                    file=str(p),
                    hint="Give a folder of specs, spec files, or .zip packs",
                )
                for p in empty
            ]
        )
    out = Collection()
    verified = {p.resolve() for p in signed}
    for path in find_specs(paths):
        try:
            env = (
                load_pack(path, cache_dir=cache_dir, trust_code=trust_code or path.resolve() in verified)
                if is_pack(path)
                else load_environment(path, trust_code=True if trust_code else None)
            )
        except EnvbuilderError as exc:
            out.failures.append(LoadFailure(path, exc))
            continue
        except Exception as exc:  # a plugin's bug must not stop the other environments
            error = EnvbuilderError(f"unexpected {type(exc).__name__}: {exc}", code="load_failed")
            out.failures.append(LoadFailure(path, error))
            continue
        if env.name in out.paths:
            message = f"environment name {env.name!r} is already used by {out.paths[env.name]}"
            hint = "Each environment a server serves needs its own `name:`"
            problem = (
                Problem(code="duplicate_name", message=message, file=str(path), hint=hint)
                if is_pack(path)  # its spec sits in the cache: name the pack instead
                else env.loaded.locate(("name",), message, code="duplicate_name", hint=hint)
            )
            raise SpecError([problem])
        out.envs.append(env)
        out.paths[env.name] = path
    return out
