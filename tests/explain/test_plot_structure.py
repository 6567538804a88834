"""What the plots draw, read from their matplotlib objects (axes, lines, legends, texts)."""

from __future__ import annotations

import itertools

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from tilesim import plots
from tilesim.hwmodels import load_gpu
from tilesim.simulator import simulate
from tilesim.traces import Workload, build
from tilesim.whatif import parse_vary, run_sweep, shapes

GPU = load_gpu("h100")
SHAPE = Workload(1, 4, 1024, 1024, 128)


@pytest.fixture(scope="module")
def points():
    """The four algorithms on the H100, v2 and v3 with measurements beside them."""
    measured = {"v2": (200.0, (190.0, 215.0)), "v3": (230.0, (220.0, 240.0))}
    out = []
    for algo in ("standard", "v1", "v2", "v3"):
        p = simulate(build(algo, SHAPE, GPU), GPU)
        m, spread = measured.get(algo, (None, None))
        out.append(plots.RooflinePoint.of(p, GPU, measured_tflops=m, measured_range=spread))
    return out


def texts(fig) -> list[Text]:
    """Every text ``fig`` shows once drawn (tick labels of ticks beyond the view are not)."""
    FigureCanvasAgg(fig).draw()
    in_view = {}
    for ax in fig.axes:
        for axis, (lo, hi), k in ((ax.xaxis, ax.get_xlim(), 0), (ax.yaxis, ax.get_ylim(), 1)):
            for t in axis.get_ticklabels() + axis.get_ticklabels(minor=True):
                in_view[id(t)] = min(lo, hi) <= t.get_position()[k] <= max(lo, hi)
    return [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and in_view.get(id(t), True)
    ]


def by_label(ax, prefix: str):
    return [line for line in ax.get_lines() if line.get_label().startswith(prefix)]


# -- roofline ------------------------------------------------------------------------------


def test_each_memory_level_is_a_roof_of_its_own_bandwidth(points):
    ax, _ = plots.roofline_figure(GPU, points).axes[:2]
    for name, bw in plots.roofs(GPU)[0]:
        (roof,) = by_label(ax, f"{name} roof")
        (x0, x1), (y0, y1) = roof.get_xdata(), roof.get_ydata()
        assert y0 / x0 == pytest.approx(bw / 1e12) and y1 / x1 == pytest.approx(bw / 1e12)


def test_each_algorithm_sits_at_each_levels_own_intensity(points):
    ax = plots.roofline_figure(GPU, points).axes[0]
    drawn = {tuple(map(float, xy)) for c in ax.collections for xy in c.get_offsets()}
    for p in points:
        for x in (p.intensity, p.l2_intensity, p.smem_intensity):
            assert any(a == pytest.approx(x) and b == pytest.approx(p.tflops) for a, b in drawn), (
                p.label,
                x,
            )


def test_levels_differ_where_the_l2_serves_reuse(points):
    v2 = next(p for p in points if p.label == "v2")
    assert v2.l2_intensity < v2.intensity / 4  # K and V re-read from the L2, not HBM


def test_sfu_and_fp32_are_not_roofs_on_the_matmul_axis_but_ceilings_of_their_own(points):
    fig = plots.roofline_figure(GPU, points)
    ax, pipes = fig.axes[:2]
    assert not by_label(ax, "SFU") and not by_label(ax, "FP32")
    assert "SFU" in pipes.get_title() and "FP32" in pipes.get_title()
    bars = [patch.get_width() for patch in pipes.patches]
    want = [v for p in points for v in (p.sfu_ceiling_tflops, p.fp32_ceiling_tflops)]
    assert sorted(bars) == pytest.approx(sorted(want))
    v2 = simulate(build("v2", SHAPE, GPU), GPU)
    # the SFU ceiling: the matmul FLOPs over the exponentials' time at the SFU's peak
    sfu = v2.matmul_flops / (v2.exp_count / GPU.peak_sfu_ops) / 1e12
    assert next(p for p in points if p.label == "v2").sfu_ceiling_tflops == pytest.approx(sfu)


def test_a_measured_point_is_joined_to_its_prediction_with_its_error_and_spread(points):
    ax = plots.roofline_figure(GPU, points).axes[0]
    v2 = next(p for p in points if p.label == "v2")
    joins = [
        line
        for line in ax.get_lines()
        if list(line.get_xdata()) == [v2.intensity, v2.intensity]
        and sorted(line.get_ydata()) == sorted([v2.tflops, 200.0])
    ]
    assert joins, "a line from the predicted to the measured point"
    bars = [c for c in ax.collections if type(c).__name__ == "LineCollection"]
    spans = [seg for c in bars for seg in c.get_segments()]
    assert any(list(s[:, 1]) == pytest.approx([190.0, 215.0]) for s in spans)
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    legend += " ".join(t.get_text() for t in ax.artists[0].get_texts())
    assert f"v2: {v2.tflops:.0f} TFLOPS predicted, 200 measured (time {100 * v2.error:+.1f}%)" in (
        legend
    )


def test_no_label_lands_on_another_or_off_the_figure(points):
    note = "no measured points: the results files hold no h100 measurement (devices: NVIDIA H200)"
    fig = plots.roofline_figure(GPU, points, title="a long title " * 12, note=note)
    shown = texts(fig)
    assert any(note[:30] in t.get_text() for t in shown)
    renderer = fig.canvas.get_renderer()
    boxes = [(t, t.get_window_extent(renderer)) for t in shown]
    page = fig.bbox
    for t, box in boxes:
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1, t.get_text()
        assert page.y0 - 1 <= box.y0 and box.y1 <= page.y1 + 1, t.get_text()
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())


def test_an_error_is_in_time_signed_as_the_report_signs_it():
    # predicted 500 TFLOPS, measured 550: the prediction takes 10% longer than the run
    p = plots.RooflinePoint("v2", 100.0, 500.0, measured_tflops=550.0)
    assert p.error == pytest.approx(0.1)
    assert plots.RooflinePoint("v2", 100.0, 550.0).error is None


# -- Gantt ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def timelines():
    w = Workload(1, 1, 4096, 4096, 128)
    return [
        simulate(build(a, w, GPU), GPU, "detailed", timeline=True, timeline_sms=2)
        for a in ("v2", "v3")
    ]


def test_gantt_panels_share_one_time_window(timelines):
    fig = plots.gantt_figure(timelines, sms=2)
    axes = fig.axes[:4]  # v2: throughput, SMs; v3: throughput, SMs
    windows = {ax.get_xlim() for ax in axes}
    assert len(windows) == 1
    (lo, hi) = windows.pop()
    for ax in axes[1:]:
        assert axes[0].get_shared_x_axes().joined(axes[0], ax)
    for p in timelines:  # inside both runs, away from their starts
        assert 0 < lo < hi < p.time_s * 1e6
    assert axes[0].get_ylim() == axes[2].get_ylim()  # one throughput scale
    assert (lo, hi) == pytest.approx(plots.shared_window([_lanes(p) for p in timelines]))


def test_a_given_gantt_window_is_every_panels(timelines):
    fig = plots.gantt_figure(timelines, sms=2, window="10:12")
    assert {ax.get_xlim() for ax in fig.axes[:4]} == {(10.0, 12.0)}


def _lanes(p):
    from tilesim.plots.gantt import _Lanes

    return _Lanes.of(plots.perfetto_of(p))


# -- what-if ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep():
    vary = parse_vary(["hbm_bandwidth_Bps=0.5x,1x,2x", "l2_bytes=0.5x,1x"], GPU)
    return run_sweep(GPU, vary, ["standard", "v2"], shapes([256], [64], batch=1, heads=2))


def test_whatif_has_one_facet_per_field(sweep):
    fig = plots.whatif_figure(sweep)
    assert len(fig.axes) == 2
    assert [ax.get_xlabel() for ax in fig.axes] == ["hbm_bandwidth_Bps (B/s)", "l2_bytes (B)"]
    assert "others at l2_bytes=1x" in fig.axes[0].get_title()


def test_whatif_x_values_are_absolute_and_others_held_at_the_preset(sweep):
    ax = plots.whatif_figure(sweep).axes[0]
    (std,) = by_label(ax, "standard")
    bw = GPU.hbm_bandwidth_Bps
    assert list(std.get_xdata()) == pytest.approx([bw / 2, bw, 2 * bw])
    rows = [r for r in sweep.rows if r["algo"] == "standard" and r["settings"]["l2_bytes"] == "1x"]
    assert list(std.get_ydata()) == pytest.approx([r["speedup"] for r in rows])


def test_whatif_draws_ideal_scaling_for_a_rate_and_none_for_a_capacity(sweep):
    bandwidth, capacity = plots.whatif_figure(sweep).axes
    (ideal,) = by_label(bandwidth, "ideal")
    xs, ys = ideal.get_xdata(), ideal.get_ydata()
    assert list(ys) == pytest.approx([x / GPU.hbm_bandwidth_Bps for x in xs])
    assert not by_label(capacity, "ideal")


def test_a_latency_scales_ideally_as_its_inverse():
    from tilesim.whatif import ideal_speedup

    assert ideal_speedup("hbm_latency_cycles", 2.0) == 0.5
    assert ideal_speedup("hbm_bandwidth_Bps", 2.0) == 2.0
    assert ideal_speedup("l2_bytes", 2.0) is None
    assert ideal_speedup("has_tma", 1.0) is None
