"""A baselines file of the wrong content (hostile corpus, round three, issue 25): binary,
nested too deep, tables of the wrong type, references that are no finite number above 0, bounds
that are no fractions, weights of the wrong kind: each is one line naming the file, exit 2, never a
traceback. Valid files at the edges still load and give a verdict."""

from __future__ import annotations

import pytest
from error_checks import one_line_error, strict_json
from run_records import hvd_log, make_run

pytestmark = pytest.mark.hostile

REF = '[references."hvd-synthetic"]\n"*" = {{ img_per_sec_total = {ref} }}\n'
BAD_BASELINES = {
    "binary": (b"\xc4\x00\xff\xfe", "not UTF-8"),
    "deep arrays": ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
    "deep inline tables": ("[references]\nx = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "nested deeper"),
    "references is a list": ("references = [1, 2]\n", "no [references"),
    "configuration is a number": ('[references]\n"hvd-synthetic" = 3\n', 'references.hvd-synthetic'),
    "configuration is blank": ('[references."  "]\n"*" = { m = [1.0, "s"] }\n', "payload name"),
    "condition without =": ('[references."osu nodes"]\n"*" = { m = [1.0, "s"] }\n', "not key=value"),
    "condition twice": ('[references."osu nodes=1 nodes=2"]\n"*" = { m = [1.0, "s"] }\n', "nodes is given twice"),
    "system empty": ('[references."osu"]\n"" = { m = [1.0, "s"] }\n', "not empty"),
    "system is a number": ('[references."osu"]\n"*" = 5\n', 'references.osu."*"'),
    "system has no metrics": ('[references."osu"]\n"*" = {}\n', "must map metric names"),
    "reference not a list": (REF.format(ref="1000.0"), "must be [value, lower, upper, unit]"),
    "reference of three": (REF.format(ref='[1000.0, 0.1, "img/s"]'), "must be [value, lower, upper, unit]"),
    "value is text": (REF.format(ref='["1000", -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "value is true": (REF.format(ref='[true, "img/s"]'), "finite number > 0"),
    "value is nan": (REF.format(ref='[nan, -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "value is inf": (REF.format(ref='[inf, "img/s"]'), "finite number > 0"),
    "value is zero": (REF.format(ref='[0, -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "value is negative": (REF.format(ref='[-5.0, -0.1, 0.1, "img/s"]'), "finite number > 0"),
    "lower is text": (REF.format(ref='[1000.0, "low", 0.1, "img/s"]'), "lower must be a fraction"),
    "lower is positive": (REF.format(ref='[1000.0, 0.1, 0.2, "img/s"]'), "lower must be a fraction"),
    "lower below -1": (REF.format(ref='[1000.0, -2.0, 0.2, "img/s"]'), "lower must be a fraction"),
    "lower is nan": (REF.format(ref='[1000.0, nan, 0.2, "img/s"]'), "lower must be a fraction"),
    "upper is negative": (REF.format(ref='[1000.0, -0.1, -0.2, "img/s"]'), "upper must be a fraction"),
    "upper is inf": (REF.format(ref='[1000.0, -0.1, inf, "img/s"]'), "upper must be a fraction"),
    "zero tolerance": (REF.format(ref='[1000.0, 0.0, 0.0, "img/s"]'), "both 0"),
    "unit is a number": (REF.format(ref='[1000.0, -0.1, 0.1, 5]'), "unit must be text"),
    "weights is a list": ("weights = [1]\n" + REF.format(ref='[1000.0, "img/s"]'), "weights must be a table"),
    "weight is text": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"hvd-synthetic" = "heavy"\n',
                       "weights.hvd-synthetic"),
    "weight is negative": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"hvd-synthetic" = -1.0\n',
                           "finite number > 0"),
    "weight is nan": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"hvd-synthetic" = nan\n',
                      "finite number > 0"),
    "weight names no configuration": (REF.format(ref='[1000.0, "img/s"]') + '[weights]\n"osu" = 2.0\n',
                                      "no such configuration"),
    "unknown top-level key": ("extra = 1\n" + REF.format(ref='[1000.0, "img/s"]'), "unknown key(s) extra; valid: references, weights"),
}


@pytest.mark.parametrize("case", sorted(BAD_BASELINES))
def test_bad_baselines_content_is_one_line_naming_the_file(tmp_path, hpcai, case):
    text, fragment = BAD_BASELINES[case]
    for i in range(2):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    path = tmp_path / "b.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    res = hpcai("results", "compare", str(tmp_path / "runs"), "--baseline", str(path))
    one_line_error(res, str(path), fragment)


def test_good_baselines_at_the_edges_still_load(tmp_path, hpcai):
    """lower -1 (no lower bound), upper 0, [value, unit], a weight: valid, and a verdict comes out."""
    (tmp_path / "b.toml").write_text(
        '[references."hvd-synthetic"]\n"*" = { img_per_sec_total = [900.0, -1, 0.5, "img/s"] }\n'
        '[references."osu nodes=2 ntasks_per_node=1"]\n"local:*" = { latency_8B = [2.0, -0.1, 0, "us"] }\n'
        '[weights]\n"hvd-synthetic" = 1e308\n')
    for i in range(4):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"), "--json")
    data = strict_json(res.stdout)
    assert res.exit_code == 0 and data["rows"][0]["verdict"] == "pass"
    assert data["score"] == pytest.approx(1000 / 900)  # a weight near the float limit: no inf / inf
