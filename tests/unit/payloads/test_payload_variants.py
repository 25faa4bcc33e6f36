"""Build variants of a payload (`hpcai build --variant PAYLOAD=NAME`): hf-clm=seed installs the
WikiText-2 benchmark's own transformers / datasets / evaluate versions (the image built with it
runs in tests/integration/test_payloads_image.py)."""

from __future__ import annotations

import pytest

from hpcai.errors import UsageError
from hpcai.image.render import render
from hpcai.image.spec import make_spec
from hpcai.payloads import load_payload


def test_the_variant_reaches_its_hook_the_labels_and_the_tag():
    plain = make_spec("pytorch-cpu", payloads="sanity,hf-clm", sha="abc")
    seed = make_spec("pytorch-cpu", payloads="sanity,hf-clm", variants=["hf-clm=seed"], sha="abc")
    assert seed.payload_variants == (("hf-clm", "seed"),) and seed.labels()["hpcai.payload-variants"] == "hf-clm=seed"
    assert "hpcai.payload-variants" not in plain.labels() and seed.tag != plain.tag
    for fmt in ("docker", "apptainer"):
        text = render(seed, fmt)
        hook = text.index("payload-hook.sh hf-clm install.sh")
        assert 0 < text.rindex("HF_CLM_VARIANT", 0, hook), fmt  # set just before the hf-clm hook
        assert "HF_CLM_VARIANT" not in render(plain, fmt)


def test_hf_clm_declares_the_seed_stack():
    m = load_payload("hf-clm")
    assert set(m.variants) == {"seed"} and "transformers 4.37.0" in m.variants["seed"]
    seed = (m.dir / "requirements-seed.txt").read_text().split()
    for pin in ("transformers==4.37.0", "datasets==2.14.5", "evaluate==0.4.1"):
        assert pin in seed


@pytest.mark.parametrize("given, message", [
    (["hf-clm"], "--variant 'hf-clm': expected PAYLOAD=VARIANT, e.g. hf-clm=seed"),
    (["hf-clm=old"], "unknown --variant for hf-clm 'old'; valid: seed"),
    (["sanity=seed"], "--variant sanity=seed: payload sanity has no build variants"),
    (["osu=seed"], "unknown --variant payload 'osu'; valid: hf-clm, sanity"),
    (["hf-clm=seed", "hf-clm=seed2"], "unknown --variant for hf-clm 'seed2'; valid: seed"),
    (["hf-clm=seed\nx"], "--variant"),
])
def test_bad_variants_are_one_line(given, message):
    with pytest.raises(UsageError) as err:
        make_spec("pytorch-cpu", payloads="sanity,hf-clm", variants=given)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_cli_refuses_a_bad_variant_with_exit_2(hpcai):
    res = hpcai("render", "pytorch-cpu", "--payloads", "hf-clm", "--variant", "hf-clm=nope")
    assert res.exit_code == 2 and res.stderr.strip() == "error: unknown --variant for hf-clm 'nope'; valid: seed"
    shown = hpcai("payloads", "show", "hf-clm")
    assert "build variant (hpcai build --variant hf-clm=seed): the WikiText-2 benchmark's own stack" in shown.stdout


def test_a_familys_own_downloads_reach_only_its_images():
    """megatron-gpt fetches Megatron-LM and CARAML on CUDA images only ([install.cuda] downloads):
    their pins and labels are on those images alone."""
    gpu = make_spec("pytorch-ngc", payloads="megatron-gpt", sha="abc")
    cpu = make_spec("pytorch-cpu", payloads="megatron-gpt", sha="abc")
    assert {"megatron-lm", "caraml"} <= set(gpu.used_components())
    assert not {"megatron-lm", "caraml"} & set(cpu.used_components())
    assert "hpcai.component.megatron-lm" in gpu.labels() and "hpcai.component.megatron-lm" not in cpu.labels()
    assert "MEGATRON_LM_SHA256" in render(gpu) and "MEGATRON_LM_SHA256" not in render(cpu)
