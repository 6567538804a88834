"""`tilesim bench`: tilesim's four kernels beside PyTorch's SDPA backends and
FlashAttention-4, same shapes.

Each shape gets fresh inputs; each implementation is checked against the float32
reference first (a wrong or failing one is recorded and skipped), then timed by
``do_bench`` (median, L2 flushed). tilesim's kernels are timed as their bare launches
(``time_s``, through ``kernels.launches``) and through the public API,
``kernels.attention(q, k, v, algo=...)``: its output checked too, then ``api_time_s``
(do_bench) and its host time per call, ``api_host_s``, beside the bare launches'
``launch_host_s`` (the API's overhead is the difference). Standard attention's three
kernels are also timed one by one (``parts``), through the kernels' own launch list.
``fa4`` is FlashAttention-4's CuTe-DSL forward (``flash_attn.cute``; on Hopper it runs
FlashAttention-3's algorithm); where it is not installed or cannot run, its rows are
skips or errors with the reason.

TFLOPS use the shared convention: 4·B·H·N²·d, half for causal, 2.5x that for
the backward.

Backward shapes (``pass_="bwd"``) time only the backward: tilesim's kernels
through ``backward_launches`` (the forward runs once, untimed; each launch is
also timed alone as ``parts``), SDPA's backends as ``torch.autograd.grad`` of
one forward's output with the graph retained, so every call is the backend's
backward kernels alone. Gradients are checked against float32 autograd first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ...errors import TilesimError
from ...traces.config import default_config
from ...traces.workload import ALGOS
from .. import schema
from ..grid import SDPA_BACKENDS, BenchShape
from . import metadata, timing

GRAPH_TIMING = (
    "forward points: median of CUDA-graph replays of the call's launches, L2 flushed before "
    "each: the GPU's time without the host's launch cost"
)
RUN_LIMIT_S = 45.0  # one implementation on one shape not done by then: taken for a hang
# FlashAttention-4 compiles its CuTe-DSL kernels on first use, in the timed process
FA4_RUN_LIMIT_S = 150.0
IMPLS = tuple(f"tilesim-{a}" for a in ALGOS) + tuple(f"sdpa-{b}" for b in SDPA_BACKENDS) + ("fa4",)


# The backward's implementations: tilesim's kernels with a backward, and SDPA's
# backends (math's backward keeps several n x n float32 matrices: left out by default).
BACKWARD_IMPLS = ("tilesim-standard", "tilesim-v1", "tilesim-v2") + tuple(
    f"sdpa-{b}" for b in SDPA_BACKENDS if b != "math"
)


def parse_impls(text: str | None, pass_: str = "fwd") -> tuple[str, ...]:
    """``"v2,sdpa-flash"`` -> ("tilesim-v2", "sdpa-flash"); None -> every implementation
    (of the backward, for ``pass_`` "bwd")."""
    if not text:
        return IMPLS if pass_ == "fwd" else BACKWARD_IMPLS
    out = []
    for item in (s.strip() for s in text.split(",")):
        name = f"tilesim-{item}" if item in ALGOS else item
        if name not in IMPLS:
            raise TilesimError(f"unknown implementation {item!r} (choose from {', '.join(IMPLS)})")
        if pass_ == "bwd" and name == "tilesim-v3":
            raise TilesimError("tilesim-v3 has no backward kernel (choose standard, v1 or v2)")
        if pass_ == "bwd" and name == "fa4":
            raise TilesimError("fa4 is benched forward only")
        out.append(name)
    return tuple(dict.fromkeys(out))


def run_bench(
    shapes: Sequence[BenchShape],
    out_path: Path,
    impls: Sequence[str] = IMPLS,
    *,
    warmup_ms: float = 10,
    rep_ms: float = 30,
    time_budget_s: float | None = None,
    log: Callable[[str], None] = print,
    meta_extra: dict | None = None,
    graph: bool = True,
) -> dict:
    import torch

    from ...hwmodels import load_gpu
    from ...hwmodels.presets import base_preset_for

    device = torch.cuda.get_device_name(0)
    preset = load_gpu(base_preset_for(device))
    meta = metadata.collect(
        {
            "command": "bench",
            "config_preset": preset.name,
            "timing": {
                "function": "triton.testing.do_bench",
                "return_mode": "median",
                "repeats": timing.REPEATS,
                "time_s": "smallest of the repeated do_bench medians",
                "warmup_ms": warmup_ms,
                "rep_ms": rep_ms,
                "l2_flushed": True,
            },
            "tolerance": timing.TOLERANCE,
            **(meta_extra or {}),
        }
    )
    if graph:
        meta["timing"]["time_graph_s"] = GRAPH_TIMING
        meta["timing"]["clock_counter_MHz"] = timing.COUNTER_CLOCK
    doc = schema.new_results("bench", meta)
    rows = doc["measurements"]
    t_start = time.perf_counter()
    samplers = []

    def on_hang(what: str) -> None:
        limit = _run_limit(what[1])
        rows.append(
            _row(
                what[1],
                what[0],
                None,
                "error",
                note=f"no result after {limit:.0f} s (hung kernel?); the bench stopped here",
            )
        )
        log(f"{what[1]}: no result after {limit:.0f} s; results saved, exiting")
        schema.save_results(doc, out_path)
        for s in samplers:
            s.__exit__(None, None, None)

    watchdog = timing.Watchdog(RUN_LIMIT_S, on_hang)
    with metadata.ClockSampler(interval_ms=100) as sampler:
        samplers.append(sampler)
        for i, shape in enumerate(shapes):
            w = shape.workload
            over = time_budget_s is not None and time.perf_counter() - t_start > time_budget_s
            q, k, v, scales = timing.make_inputs(w, seed=1000 + i)
            do = timing.make_grad_output(w, seed=1000 + i) if w.pass_ == "bwd" else None
            for impl in impls:
                if shape.impls is not None and impl not in shape.impls:
                    continue
                if over:
                    rows.append(_row(impl, w, None, "skipped", note="time budget spent"))
                    continue
                watchdog.arm((w, impl), _run_limit(impl))
                if do is not None:
                    row = _one_backward(
                        impl, w, q, k, v, do, preset, warmup_ms, rep_ms, torch, sampler
                    )
                else:
                    row = _one(
                        impl, w, q, k, v, scales, preset, warmup_ms, rep_ms, torch, sampler, graph
                    )
                timing.release()
                watchdog.disarm()
                rows.append(row)
                log(f"[{i + 1}/{len(shapes)}] {shape.label} {impl}: {_describe(row)}")
            q = k = v = do = None
            timing.release()
            schema.save_results(doc, out_path)
    metadata.finish(meta)
    schema.save_results(doc, out_path)
    return doc


def _run_limit(impl: str) -> float:
    return FA4_RUN_LIMIT_S if impl == "fa4" else RUN_LIMIT_S


def _row(impl, w, config, status, **kw) -> dict:
    algo = impl.removeprefix("tilesim-") if impl.startswith("tilesim-") else None
    return schema.kernel_record(algo, w, config, status, impl=impl, **kw)


def _one(impl, w, q, k, v, scales, preset, warmup_ms, rep_ms, torch, sampler, graph) -> dict:
    config = out = None
    check = None  # what the output check runs, where not ``run`` itself
    try:
        if impl.startswith("tilesim-"):
            algo = impl.removeprefix("tilesim-")
            config = default_config(algo, w, preset)
            if algo == "standard":
                need = timing.standard_scratch_bytes(w) * 1.25
                if need > timing.free_bytes():
                    return _row(impl, w, config, "skipped", note="S and P do not fit in memory")
            out = timing.output_buffer(w)
            run = _tilesim_run(algo, q, k, v, w.causal, config, scales, out)
            ctx = _nullcontext()
        elif impl == "fa4":
            run, check = _fa4_run(q, k, v, w.causal)
            ctx = _nullcontext()
        else:
            backend = impl.removeprefix("sdpa-")
            if backend == "math" and timing.math_scratch_bytes(w) * 1.25 > timing.free_bytes():
                return _row(impl, w, None, "skipped", note="the math backend's n x n does not fit")
            run, ctx = _sdpa_run(backend, q, k, v, w.causal, torch)
        with ctx:
            err = timing.check_output(check or run, q, k, v, w.causal, scales, w.dtype, out=out)
            if not err <= timing.TOLERANCE[w.dtype]:
                return _row(impl, w, config, "wrong", rel_error=err, note=f"rel. error {err:.3g}")
            t0 = time.perf_counter()
            t, medians = timing.bench_repeat(run, warmup_ms, rep_ms)
            clock = timing.clock_during(sampler, t0)
            replay = None
            if graph:
                timing.release()  # the eager run's cached blocks, for the graph's own pool
                replay = timing.bench_graph_s(run, warmup_ms, rep_ms)
                counter = timing.counter_clock_hz(run) if replay is not None else None
        extra = {"time_medians_s": medians, "clock_sm_MHz": clock}
        if replay is not None:
            extra["time_graph_s"] = replay
            if counter:
                extra["clock_counter_MHz"] = counter / 1e6
        if impl == "tilesim-standard":
            extra["parts"] = _standard_parts(q, k, v, w.causal, config, warmup_ms, rep_ms)
        if impl.startswith("tilesim-"):
            extra.update(
                _api_figures(impl, w, q, k, v, config, scales, run, warmup_ms, rep_ms, sampler)
            )
        return _row(impl, w, config, "ok", time_s=t, rel_error=err, **extra)
    except TilesimError as exc:
        return _row(impl, w, config, "skipped", note=timing.first_line(exc))
    except torch.cuda.OutOfMemoryError as exc:
        return _row(impl, w, config, "skipped", note="out of GPU memory: " + timing.first_line(exc))
    except Exception as exc:  # an SDPA backend that refuses a shape, a compile failure
        return _row(
            impl, w, config, "error", note=f"{type(exc).__name__}: {timing.first_line(exc)}"
        )


def _one_backward(impl, w, q, k, v, do, preset, warmup_ms, rep_ms, torch, sampler) -> dict:
    config = None
    try:
        extra = {}
        if impl.startswith("tilesim-"):
            algo = impl.removeprefix("tilesim-")
            config = default_config(algo, w, preset)  # w.pass_ == "bwd": the backward's
            if algo == "standard":
                need = timing.standard_backward_scratch_bytes(w) * 1.25
                if need > timing.free_bytes():
                    return _row(impl, w, config, "skipped", note="S, P, dP, dS do not fit")
            grads, run, runs = timing.backward_run(algo, q, k, v, do, w.causal, config)
            ctx = _nullcontext()
        else:
            backend = impl.removeprefix("sdpa-")
            if backend == "math" and 2 * timing.math_scratch_bytes(w) * 1.25 > timing.free_bytes():
                return _row(impl, w, None, "skipped", note="the math backend's n x n does not fit")
            grads, runs = None, None
            run, ctx = _sdpa_backward_run(backend, q, k, v, do, w.causal, torch)
        with ctx:
            err = timing.check_grads(run, q, k, v, do, w.causal, grads)
            tol = timing.GRAD_TOLERANCE[w.dtype]
            if not err <= tol:
                return _row(
                    impl, w, config, "wrong", rel_error=err, note=f"grad rel. error {err:.3g}"
                )
            t0 = time.perf_counter()
            t, medians = timing.bench_repeat(run, warmup_ms, rep_ms)
        extra = {"time_medians_s": medians, "clock_sm_MHz": timing.clock_during(sampler, t0)}
        if runs is not None:
            extra["parts"] = timing.bench_parts(runs, warmup_ms, rep_ms)
        return _row(impl, w, config, "ok", time_s=t, rel_error=err, **extra)
    except TilesimError as exc:
        return _row(impl, w, config, "skipped", note=timing.first_line(exc))
    except torch.cuda.OutOfMemoryError as exc:
        return _row(impl, w, config, "skipped", note="out of GPU memory: " + timing.first_line(exc))
    except Exception as exc:  # an SDPA backend that refuses a shape, a compile failure
        return _row(
            impl, w, config, "error", note=f"{type(exc).__name__}: {timing.first_line(exc)}"
        )


def _sdpa_backward_run(backend: str, q, k, v, do, causal: bool, torch):
    """(run, ctx): ``run()`` is SDPA's backward of one forward (graph retained), returning
    (dq, dk, dv). The forward runs here, once, under the backend, which picks the
    backward kernels its autograd node runs."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    _, ctx = _sdpa_run(backend, q, k, v, causal, torch)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    with ctx:
        out = sdpa(qg, kg, vg, is_causal=causal)

    def run():
        return torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)

    return run, _nullcontext()


def _tilesim_run(algo, q, k, v, causal, config, scales, out):
    return timing.kernel_run(algo, q, k, v, causal, config, scales, out)[1]


def _api_figures(impl, w, q, k, v, config, scales, launch_run, warmup_ms, rep_ms, sampler) -> dict:
    """The public API beside the bare launches, on the same inputs and config: its
    output checked, then ``api_time_s`` (do_bench, whatever the host adds; the SM clock
    meanwhile, ``api_clock_sm_MHz``), ``api_host_s`` and ``launch_host_s`` (host seconds
    per call, :func:`timing.host_s`)."""
    from ...kernels import attention
    from ...kernels._common import device_gpu

    algo = impl.removeprefix("tilesim-")
    # the default config as a user gets it (None), unless the bench's preset chose another
    given = None if config == default_config(algo, w, device_gpu(q.device)) else config

    def api():
        return attention(q, k, v, causal=w.causal, algo=algo, config=given, **scales)

    try:
        err = timing.check_output(api, q, k, v, w.causal, scales, w.dtype)
        if not err <= timing.TOLERANCE[w.dtype]:
            return {"api_rel_error": err, "api_note": f"wrong: rel. error {err:.3g}"}
        t0 = time.perf_counter()
        t, _ = timing.bench_repeat(api, warmup_ms, rep_ms)
        return {
            "api_time_s": t,
            "api_tflops": schema.attention_flops(w) / t / 1e12,
            "api_clock_sm_MHz": timing.clock_during(sampler, t0),
            "api_host_s": timing.host_s(api),
            "launch_host_s": timing.host_s(launch_run),
            "api_rel_error": err,
        }
    except Exception as exc:  # recorded beside the launches' figures, which stand
        return {"api_note": f"{type(exc).__name__}: {timing.first_line(exc)}"}


def _fa4_run(q, k, v, causal: bool):
    """(run, check): FlashAttention-4's forward on [B, N, H, d] copies of q, k, v (its
    layout; made once, here), and ``check`` returning its output as [B, H, N, d]."""
    try:
        from flash_attn.cute import flash_attn_func
    except ImportError as exc:
        raise TilesimError(
            f"FlashAttention-4 is not installed (flash_attn.cute: {timing.first_line(exc)})"
        ) from None
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))

    def run():
        return flash_attn_func(qt, kt, vt, causal=causal)

    def check():
        out = run()
        return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

    return run, check


def _sdpa_run(backend: str, q, k, v, causal: bool, torch):
    """SDPA on one backend. Grouped-query heads go in as they are (``enable_gqa``); a
    causal mask of fewer queries than keys is ``causal_lower_right`` (bottom-right, as
    tilesim's), which ``is_causal`` is not (top-left)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    which = {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }[backend]
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    n_q, n_kv = q.shape[2], k.shape[2]
    if causal and n_q != n_kv:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(n_q, n_kv)
        return (lambda: sdpa(q, k, v, attn_mask=mask, **gqa)), sdpa_kernel([which])
    return (lambda: sdpa(q, k, v, is_causal=causal, **gqa)), sdpa_kernel([which])


def _standard_parts(q, k, v, causal, config, warmup_ms, rep_ms) -> dict:
    """Times of standard attention's three launches, each by do_bench on its own."""
    from ...kernels import launches

    _, runs = launches(q, k, v, causal=causal, algo="standard", config=config)
    parts = {}
    for name, run in runs:
        run()  # in order, so each launch reads what the previous one wrote
        parts[name] = timing.bench_s(run, warmup_ms, rep_ms)
    return parts


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _describe(row: dict) -> str:
    if row["status"] == "ok":
        parts = row.get("parts") or {}
        split = ", ".join(f"{k.removeprefix('standard_')} {v * 1e3:.3f}" for k, v in parts.items())
        api = ""
        if row.get("api_host_s") is not None:
            api = (
                f"; API {row['api_tflops']:6.1f} TFLOPS, {row['api_host_s'] * 1e6:.1f} µs host "
                f"per call (launches {row['launch_host_s'] * 1e6:.1f})"
            )
        elif row.get("api_note"):
            api = f"; API: {row['api_note']}"
        return (
            f"{row['time_s'] * 1e3:8.3f} ms {row['tflops']:6.1f} TFLOPS"
            + (f" ({split} ms)" if split else "")
            + api
        )
    return f"{row['status'].upper()}: {row['note']}"


def tflops_table(doc: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a bench file: one row per shape, one TFLOPS column per impl, and
    for each tilesim impl timed through the API its TFLOPS and host µs per call there."""
    impls = list(dict.fromkeys(r["impl"] for r in doc["measurements"]))
    api = [
        i for i in impls if any(r["impl"] == i and "api_host_s" in r for r in doc["measurements"])
    ]
    shapes: dict = {}
    for r in doc["measurements"]:
        w = r["workload"]
        key = (w.get("pass_", "fwd"), w["head_dim"], w["causal"], w["seqlen_q"], w["dtype"])
        shapes.setdefault(key, {})[r["impl"]] = r
    # a pass column only where the file holds more than the forward
    passes = len({key[0] for key in shapes}) > 1 or any(key[0] != "fwd" for key in shapes)
    header = (["pass"] if passes else []) + ["d", "mask", "N", *impls]
    for impl in api:
        header += [f"{impl} API", f"{impl} API µs"]
    body = []
    for (pass_, d, causal, n, _dtype), by_impl in shapes.items():
        cells = ([pass_] if passes else []) + [str(d), "causal" if causal else "full", str(n)]
        for impl in impls:
            r = by_impl.get(impl)
            if r is None:
                cells.append("")
            elif r["status"] == "ok":
                cells.append(f"{r['tflops']:.0f}")
            else:
                cells.append(r["status"])
        for impl in api:
            r = by_impl.get(impl) or {}
            if r.get("api_host_s") is None:
                cells += ["", ""]
            else:
                cells += [f"{r['api_tflops']:.0f}", f"{r['api_host_s'] * 1e6:.1f}"]
        body.append(cells)
    return header, body
