"""The package's public API is a contract: adding or removing a name is a deliberate change."""

import envbuilder
import envbuilder.authoring
import envbuilder.data
import envbuilder.graders
import envbuilder.server
import envbuilder.spec


def test_top_level_api() -> None:
    assert sorted(envbuilder.__all__) == sorted([
        "Environment", "EnvbuilderError", "Episode", "SpecError", "__version__",
        "load_environment", "load_spec"])


def test_subpackage_apis_are_sorted_and_resolve() -> None:
    for module in (envbuilder, envbuilder.data, envbuilder.graders, envbuilder.server,
                   envbuilder.spec, envbuilder.authoring):
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
