"""The prompting package's public API is a contract."""

import envbuilder.prompting


def test_prompting_api() -> None:
    assert envbuilder.prompting.__all__ == [
        "SAMPLE_ROWS",
        "Prompter",
        "flatten_messages",
        "image_blocks",
        "sniff_mime",
    ]
    for name in envbuilder.prompting.__all__:
        assert hasattr(envbuilder.prompting, name)
