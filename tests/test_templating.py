"""The sandboxed Jinja factory: filters authors use, and templates that try to escape."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from envbuilder.errors import TemplateError
from envbuilder.templating import Template, render_limits
from envbuilder.templating._isolated import render_pool


def _render(source: str, **context: object) -> str:
    return Template(source, name="t").render(context)


def test_filters() -> None:
    choices = ["red", "green"]
    assert _render("{{ c | lettered }}", c=choices) == "A. red\nB. green"
    assert _render("{{ c | lettered(sep=' ', fmt='({letter}) {choice}') }}", c=choices) == "(A) red (B) green"
    assert _render("{{ 2 | letter }} {{ '3' | letter }}") == "C D"
    assert _render("{{ c | numbered }}", c=choices) == "1. red\n2. green"
    assert _render("{{ d | json }}", d={"é": [1, None]}) == '{"é": [1, null]}'
    assert _render("{{ a | after('####') }}", a="3 + 4 = 7\n#### 7 ") == "7"
    assert _render("{{ letters[:c | length] | join(', ') }}", c=choices) == "A, B"


def test_letter_out_of_range_is_a_template_error() -> None:
    with pytest.raises(TemplateError) as info:
        _render("{{ 26 | letter }}")
    assert str(info.value) == "t: ValueError: letter: index 26 is outside 0-25"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("{{ ''.__class__.__mro__ }}", "attributes '__class__', '__mro__'"),
        ("{{ cycler.__init__.__globals__ }}", "attributes '__init__', '__globals__'"),
        ("{{ ''|attr('__class__') }}", "attribute '__class__'"),
        ("{{ x['_private'] }}", "attribute '_private'"),
    ],
)
def test_private_attributes_are_refused_when_the_template_is_compiled(source: str, names: str) -> None:
    with pytest.raises(TemplateError) as info:
        Template(source, name="t")
    assert info.value.code == "template_unsafe"
    assert str(info.value) == (
        f"t: reads the private {names}, which the template sandbox refuses. "
        "Templates may only read the task's fields"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ ''|attr('__cl' ~ 'ass__') }}", "access to attribute '__class__' of 'str' object is unsafe"),
        (
            "{{ cycler['__in' ~ 'it__']['__glo' ~ 'bals__'] }}",
            "access to attribute '__init__' of 'type' object is unsafe",
        ),
        ("{{ ((10**64)**64)**64 }}", "a power that large is not allowed"),
        ("{% set x = [] %}{{ x.append(1) }}", "access to attribute 'append' of 'list' object is unsafe"),
    ],
)
def test_sandbox_refuses_escapes_and_bombs(source: str, message: str) -> None:
    with pytest.raises(TemplateError) as info:
        _render(source)
    assert info.value.code == "template_unsafe"
    assert (
        str(info.value)
        == f"t: refused by the template sandbox: {message}. Templates may only read the task's fields"
    )


def test_strict_undefined_names_available_fields() -> None:
    with pytest.raises(TemplateError) as info:
        _render("{{ questoin }}", question="q", answer="a")
    assert str(info.value) == "t: 'questoin' is undefined. Available fields: answer, question"


def test_variables_exclude_globals() -> None:
    assert Template("{{ letters[0] }}{{ q }}{% for i in range(2) %}{{ i }}{% endfor %}").variables == {"q"}


def test_template_file_relative_to_spec_then_shipped(tmp_path: Path) -> None:
    (tmp_path / "mine.jinja").write_text("Q: {{ question }}")
    assert Template("mine.jinja", base_dir=tmp_path, from_file=True).render({"question": "x"}) == "Q: x"
    shipped = Template("prompts/multiple_choice.jinja", base_dir=tmp_path, from_file=True)
    assert shipped.variables == {"question", "choices"}
    assert shipped.render({"question": "Q?", "choices": ["a", "b", "c"]}) == (
        "Q?\n\nA. a\nB. b\nC. c\n\nCall the `submit` tool with the letter of the correct answer (A, B, C)."
    )
    with pytest.raises(TemplateError) as info:
        Template("../../etc/passwd", base_dir=tmp_path, from_file=True)
    assert info.value.code == "template_not_found"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ 'x' * 10**9 }}", "repetition would build more than 1,000,000 items"),
        ("{{ (['x' * 1000000] * 1000000)|join }}", "repetition would build more than 1,000,000 items"),
        ("{{ '{:>99999999}'.format(1) }}", "a width of 99,999,999 is not allowed (at most 10,000)"),
        ("{{ '%99999999d' % 1 }}", "a width of 99,999,999 is not allowed (at most 10,000)"),
        ("{{ '%99999999d'|format(1) }}", "a width of 99,999,999 is not allowed (at most 10,000)"),
        ("{{ 'x'|center(99999999) }}", "a width of 99,999,999 is not allowed (at most 10,000)"),
        ("{{ 'x'.ljust(99999999) }}", "a width of 99,999,999 is not allowed (at most 10,000)"),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
            "{% endfor %}{{ ns.s }}",
            "the render would build more than 16,000,000 characters",
        ),
        (
            "{% set x %}{% for i in range(100000) %}{{ 'x' * 1000000 }}{% endfor %}{% endset %}{{ x }}",
            "the render would build more than 16,000,000 characters",
        ),
    ],
)
def test_render_budget_stops_templates_that_build_too_much(source: str, message: str) -> None:
    with pytest.raises(TemplateError) as info:
        _render(source)
    assert info.value.code == "template_budget"
    assert str(info.value) == (
        f"t: stopped by the render budget: {message}. "
        "Templates should show the task's fields, not build large text "
        "(or raise `limits.render_chars` in the spec)"
    )


def test_render_deadline_stops_a_runaway_loop() -> None:
    slow = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ q }}"
    assert not Template(slow).bounded and Template("{{ q|upper }}").bounded
    with render_limits(0.2, None):
        template = Template(slow, name="t")  # the budget is the one in force when it is compiled
    with pytest.raises(TemplateError) as info:
        template.render({"q": "?"})
    assert info.value.code == "template_budget"
    assert str(info.value) == (
        "t: rendering took longer than 0.2 s and was stopped. "
        "A loop in the template runs too long; loop over the task's fields only "
        "(or raise `limits.render_seconds` in the spec)"
    )
    # The thread is usable afterwards and honest loops still render.
    assert Template("{% for c in cs %}{{ c }}{% endfor %}").render({"cs": "ab"}) == "ab"


SPEC_WITH_LIMITS = """\
name: limited
dataset: {type: parquet, files: {test: data/gsm8k/test-00000-of-00001.parquet}}
splits: {test: {}}
prompt: {template: "{{ 'ab' * 600 }}{{ question }}"}
grader: {type: exact_match, target: "{{ answer }}"}
"""


def test_a_spec_sets_its_render_budget() -> None:
    from envbuilder.environment import Environment
    from envbuilder.errors import SpecError
    from envbuilder.spec import parse_spec
    from tests.conftest import ENVS

    def load(extra: str) -> Environment:
        return Environment(parse_spec(SPEC_WITH_LIMITS + extra, file="limited.yaml", base_dir=ENVS))

    task = {"question": "q", "answer": "1"}
    assert load("").prompt(task)[0].text.endswith("abq")  # the default budget: 16M characters
    with pytest.raises(SpecError) as info:
        load("limits: {render_chars: 1000}\n")  # the first task of each split renders at load
    assert "the render would build more than 1,000 characters" in str(info.value)
    assert "raise `limits.render_chars`" in str(info.value)
    with pytest.raises(SpecError) as info:
        load("limits: {render_chars: 0}\n")
    assert "limits.render_chars" in str(info.value)


@pytest.mark.parametrize(
    ("source", "inline"),
    [
        ("{{ question }}", True),
        ("{{ question | trim }} {% if answer is defined %}{{ answer.x }}{% endif %}", True),
        ("{{ answer.split('####')[-1] | trim }}", True),
        ("{{ answer.split(sep) }}", False),
        ("{{ range(10) }}", False),
        ("{{ question * 3 }}", False),
        ("{{ question ~ question }}", False),
        ("{{ question | wordwrap(2) }}", False),
        ("{% set q = question %}{{ q }}", False),
        ("{% for x in xs %}{{ x }}{% endfor %}", False),
    ],
)
def test_only_templates_that_show_fields_render_untimed_on_the_loop(source: str, inline: bool) -> None:
    assert Template(source, name="prompt.template").bounded is inline


def test_a_filter_that_holds_the_interpreter_renders_in_a_process_killed_at_its_budget() -> None:
    # One C call that holds the interpreter lock and which no deadline in the server's own threads
    # can stop: `sum` over 200,000 one-item lists copies the growing list at each step, 2 x 10^10
    # item copies (seconds for a tenth of them: over the budget and its grace by orders of
    # magnitude on any machine, not by a machine's speed; a linear C call, like one regular-
    # expression split over the render's 16M characters, takes about a second and can finish within
    # the grace on a fast machine, leaving the Python after it to the process's own deadline).
    with render_limits(0.3, None):
        template = Template("{{ ([[question]] * 200000) | sum(start=[]) | length }}", name="t")
        small = Template("{{ question | wordwrap(2) }}", name="t")
    assert not template.bounded and not small.bounded
    killed = render_pool().killed
    ticks, stop = [0], threading.Event()

    def tick() -> None:  # Python in another thread of the server
        while not stop.is_set():
            ticks[0] += 1
            stop.wait(0.002)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        with pytest.raises(TemplateError) as info:
            template.render({"question": "ab " * 16000})
    finally:
        stop.set()
        ticker.join()
    assert info.value.code == "template_budget"
    assert info.value.message == "t: rendering took longer than 0.3 s and was stopped"
    assert render_pool().killed == killed + 1  # its process was killed, not waited for
    assert ticks[0] >= 50  # the server's interpreter stayed free while it rendered
    assert small.render({"question": "ab " * 3}) == "ab\nab\nab"  # a fresh process renders


def test_a_loop_stopped_by_its_deadline_keeps_its_render_process() -> None:
    with render_limits(0.2, None):
        template = Template("{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}")
    killed = render_pool().killed
    with pytest.raises(TemplateError, match=r"longer than 0\.2 s"):
        template.render({})
    assert render_pool().killed == killed


def test_fields_a_process_cannot_receive_render_here_under_the_deadline() -> None:
    template = Template("{% for x in xs %}{{ x }}{% endfor %}")
    assert template.render({"xs": [1, 2], "lock": threading.Lock()}) == "12"


SLOW_PER_CHARACTER = "{{ question | list | map('upper') | map('lower') | join }}"
"""A loop-free template whose time is Python's, per character of the question (each C call in it
is one pass of milliseconds): a deadline stops it wherever it is."""


def test_a_loop_free_template_is_stopped_at_its_deadline() -> None:
    # Python per character (two `map`s), after C calls of milliseconds (`list`): 3 s on this
    # machine for 2.1M characters, 15 times the budget, so the process's own deadline stops it.
    with render_limits(0.2, None):
        template = Template(SLOW_PER_CHARACTER, name="prompt.template")
    with pytest.raises(TemplateError) as info:
        template.render({"question": "ab " * 700_000})
    assert info.value.code == "template_budget" and "longer than 0.2 s" in info.value.message


def test_the_load_time_check_renders_the_longest_rows_not_only_row_0(tmp_path: Path) -> None:
    import json

    from envbuilder.errors import SpecError
    from envbuilder.spec import parse_spec

    rows = [{"question": "short", "answer": "1"}] * 40
    rows[23] = {"question": "ab " * 700_000, "answer": "1"}  # seconds, 15 times the budget
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = (
        "name: wrap\ndataset: {type: jsonl, files: {test: qa.jsonl}}\nsplits: {test: {}}\n"
        'prompt: {template: "' + SLOW_PER_CHARACTER + '"}\n'
        'grader: {type: exact_match, target: "{{ answer }}"}\nlimits: {render_seconds: 0.2}\n'
    )
    from envbuilder.environment import Environment

    with pytest.raises(SpecError) as info:
        Environment(parse_spec(spec, file=str(tmp_path / "wrap.yaml"), base_dir=tmp_path))
    assert "split 'test' row 23: prompt.template: rendering took longer than 0.2 s" in str(info.value)
