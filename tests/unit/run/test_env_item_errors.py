"""A malformed `--env` item never echoes its value (hostile corpus, round three, issue 25):
one line, exit 2, and the value, maybe a token, is not in it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize("item", ["HF TOKEN=hf_s3cr3t\n", "=hf_s3cr3t", "HF-TOKEN=hf_s3cr3t", "1X=hf_s3cr3t",
                                  "A;B=hf_s3cr3t", "HF_TOKEN\n=hf_s3cr3t"])
def test_a_malformed_env_item_never_echoes_its_value(item, tmp_path, hpcai):
    res = hpcai("launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--env", item, "sanity")
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "s3cr3t" not in res.stderr + res.stdout and "expected KEY=VALUE" in res.stderr
