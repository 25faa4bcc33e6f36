"""The image options are declared once (hpcai.image.options): the commands, make_spec, the labels,
the tag's words and the Makefile all follow the table."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from hpcai.cli import build as cli
from hpcai.image import options
from hpcai.image.spec import make_spec

MAKEFILE = Path(__file__).resolve().parents[3] / "Makefile"


def test_the_commands_take_every_option_of_the_table():
    names = [o.name for o in options.OPTIONS]
    for command in (cli.build_cmd, cli.render_cmd):
        params = inspect.signature(command).parameters
        assert [p for p in params if p in names] == names
        for o in options.OPTIONS:
            assert list(params[o.name].default.param_decls) == list(o.flags)
    assert [n for n, _, _ in cli.TAG_OPTIONS] == [o.name for o in options.OPTIONS if o.picks_image]


def test_make_spec_takes_every_option_of_the_table():
    params = inspect.signature(make_spec).parameters
    assert {o.name for o in options.OPTIONS} <= set(params)


def test_every_make_variable_is_exported_by_the_makefile():
    exported = {word for line in MAKEFILE.read_text().splitlines() if line.startswith("export ")
                for word in line.split()[1:]}
    assert {o.envvars[0] for o in options.OPTIONS if o.envvars} <= exported


@pytest.mark.parametrize("switch", options.SWITCHES, ids=lambda s: s.name)
def test_a_switch_s_help_default_label_and_tag_word_agree(switch):
    help_text = options.option(switch.name).help
    assert f"Default {int(switch.default)}" in help_text
    flavor = "pytorch-ngc"  # builds every switch (cxi needs a source-built libfabric)
    plain = make_spec(flavor, payloads="none", sha="abc")
    flipped = make_spec(flavor, payloads="none", sha="abc", **{switch.name: str(int(not switch.default))})
    assert plain.labels()[switch.label] == str(int(switch.default))
    assert flipped.labels()[switch.label] == str(int(not switch.default))
    assert f"-{switch.word}" not in plain.tag and re.search(rf"-{switch.word}(-|:)", flipped.tag)


def test_a_bad_switch_value_names_its_make_variable():
    from hpcai.errors import UsageError

    for switch in options.SWITCHES:
        with pytest.raises(UsageError, match=rf"^unknown {options.variable(switch.name)} value 'maybe'"):
            make_spec("pytorch-ngc", payloads="none", sha="abc", **{switch.name: "maybe"})
