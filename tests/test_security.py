"""Shell safety of the rules and safe defaults."""

import re

from conftest import ROOT
from hitchhiker import config

# placeholders that are safe unquoted: digits by wildcard constraint, an int, a pre-quoted flag
UNQUOTED_OK = {"wildcards.r", "wildcards.e", "params.nproc", "params.previous", "params.accel"}


def test_every_value_reaching_a_shell_command_is_quoted():
    found = 0
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for block in re.findall(r"shell:\n((?:\s+\".*\"\n)+)", smk.read_text()):
            for name, fmt in re.findall(r"\{([\w.]+)(:\w+)?\}", block):
                found += 1
                assert fmt == ":q" or name in UNQUOTED_OK, f"{smk.name}: {{{name}}} reaches the shell unquoted"
    assert found > 30


def test_remote_code_is_off_unless_opted_in():
    cfg = config.load(ROOT / "config.yaml")
    assert cfg["model"]["trust_remote_code"] is False
