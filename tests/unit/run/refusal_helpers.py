"""What the launch, submit and sweep refusal tests of this folder share: a Slurm site and image,
and the check that a refusal is one line, exit 2, no traceback."""

from __future__ import annotations

SITE = ["--site", "generic-slurm", "--image", "x.sif"]


def one_line_refusal(res, fragment: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], res.stderr

