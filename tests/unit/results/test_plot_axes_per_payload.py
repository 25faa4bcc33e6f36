"""`results plot` gives each payload's metric axes of its own (hostile corpus, round three,
issue 25): five payloads get five axes, each labelled with its own metric and holding only its own
runs; a multi-payload sweep gets a scaling row per payload; two size-table payloads do not share
an axis."""

from __future__ import annotations

import pytest
from run_records import record

pytestmark = pytest.mark.hostile

FIVE = [("hvd-synthetic", "img_per_sec_total", "img/s", "horovod"), ("osu", "latency_8B", "us", "osu"),
        ("tf-resnet50", "images_per_sec", "img/s", "tf-cnn"), ("hf-clm", "samples_per_second", "samples/s", "hf"),
        ("megatron-gpt", "tflops_per_gpu", "TFLOP/s", "megatron")]


def axes_by_title(fig) -> dict[str, object]:
    return {ax.get_title(): ax for ax in fig.axes}


def test_five_payloads_get_five_axes_each_with_its_own_metric(tmp_path):
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    for i, (payload, metric, unit, parser) in enumerate(FIVE):
        for rep in range(2):
            record(tmp_path, f"{payload}-{rep}", payload, metric, unit, 10.0 * (i + 1) + rep, parser=parser)
    fig = plot.auto(load_all([tmp_path]), "bars")
    by = axes_by_title(fig)
    assert sorted(by) == sorted(p for p, *_ in FIVE)
    for i, (payload, metric, unit, _) in enumerate(FIVE):
        ax = by[payload]
        assert ax.get_ylabel() == f"{metric} ({unit})"
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels and all(f"\n{payload} " in label for label in labels)  # only this payload's runs
        bar = next(c for c in ax.containers if c.__class__.__name__ == "BarContainer")
        assert [b.get_height() for b in bar] == pytest.approx([10.0 * (i + 1) + 0.5])


def test_a_multi_payload_sweep_gets_a_scaling_row_per_payload(tmp_path):
    """The default figure for sweeps: throughput vs nodes, once per payload, labelled with its metric."""
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    for i, (payload, metric, unit, parser) in enumerate(FIVE):
        for nodes in (1, 2, 4):
            record(tmp_path, f"{payload}-{nodes}", payload, metric, unit, 100.0 * (i + 1) * nodes,
                   nodes=nodes, parser=parser)
    fig = plot.auto(load_all([tmp_path]))
    by = axes_by_title(fig)
    assert len(fig.axes) == 2 * len(FIVE)
    for i, (payload, metric, unit, _) in enumerate(FIVE):
        throughput, efficiency = by[f"{payload}: throughput"], by[f"{payload}: efficiency"]
        assert throughput.get_ylabel() == f"{metric} ({unit})"
        assert throughput.get_legend_handles_labels()[1] == [payload]  # its one series: the payload
        (series,) = throughput.containers  # an ErrorbarContainer: (data line, caps, bars)
        assert list(series.lines[0].get_ydata()) == pytest.approx([100.0 * (i + 1) * n for n in (1, 2, 4)])
        assert efficiency.get_ylabel() == "parallel efficiency" and len(efficiency.lines) == 1


def test_two_size_table_payloads_do_not_share_an_axis(tmp_path):
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    rows = [{"size": 8, "oop_busbw": 1.0}, {"size": 16, "oop_busbw": 2.0}]
    for payload in ("nccl-tests", "rccl-tests"):
        record(tmp_path, payload, payload, "busbw_avg", "GB/s", 1.5, parser="nccl-tests", details={"rows": rows})
    fig = plot.auto(load_all([tmp_path]))
    assert sorted(ax.get_title() for ax in fig.axes) == ["nccl-tests: bus bandwidth vs size",
                                                         "rccl-tests: bus bandwidth vs size"]
    assert all(len(ax.lines) == 1 for ax in fig.axes)
