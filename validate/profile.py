"""Write a kernel profile: every kernel variant the CLI can select, compiled on the CPU.

::

    python -m tilesim.validate.profile --out profiles/sm90a-triton-3.6.json
    python -m tilesim.validate.profile --out profiles/sm90a-triton-3.6.json --algos standard
    python -m tilesim.validate.profile --check results/raw/<date>-h200-registers.json

Needs torch and the Triton the profile is for (the GPU machine's: 3.6), no GPU
(``validate/cross_compile.py``). The variants: standard, v1, v2 (forward and
backward) and v3 (forward), head dims 64/128/256, fp16/bf16 (and fp8 for v3),
causal or not, each with the default config and the named configs; for
standard's row kernels every row plan an N up to ``MAX_SEQLEN`` selects; each at N a multiple
of the tiles, of 16 only and of neither, and with one head; and every variant
the committed GPU measurements (``results/raw/*-registers.json``,
``*-ncu.json``) hold. ``--algos`` rebuilds only those algorithms' variants (after a
change to their kernels) and keeps the others of the profile at ``--out``. Each
compiled kernel gives its registers and local memory (cuobjdump), its SASS loops
and spill-reload waits (``validate/sass.py``) and its issue cycles
(``validate/issue.py``). A variant that does not compile is listed
with the error. ``--check`` compiles the cases of a GPU's registers file
(``validate/gpu/registers.py``) and compares: the same registers, spills and SASS loops
mean the CPU build is the GPU's.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import itertools
import json
import sys
from pathlib import Path

from ..errors import TilesimError
from ..profiles import KernelFacts, Profile, Provenance, Variant, write
from ..traces.workload import (
    ALGOS,
    DTYPES,
    HEAD_DIMS,
    MAX_SEQLEN,
    PAPER_HIDDEN,
    KernelConfig,
    Workload,
)
from . import paths as results_paths
from .gpu import metadata

BATCH = 2  # the compile shape's batch (the kernels take none but B x H)
# One N per alignment class (traces.compiled.alignment): a multiple of every tile, of
# 16 only, of neither (N % 16 = 8, so that standard's rows, padded to 8, are not either)
SEQLENS = (1024, 1040, 1000)
UNALIGNED_BY = (0, 16, 24)  # the same classes below a power of two, for the row plans
MMA = ("HGMMA", "QGMMA", "HMMA")  # wgmma (fp16/bf16, fp8) and mma.sync
ISSUE_DECIMALS = 1
NOTES = (
    "compiled on the CPU by validate/cross_compile.py: the kernels' own launch path "
    "with a Triton driver that names the target and launches nothing",
    f"compile shapes: batch {BATCH}, heads {PAPER_HIDDEN}/d and 1; N = "
    f"{', '.join(map(str, SEQLENS))} (a multiple of every tile, of 16 only, of neither), "
    "and for the row kernels one N of each of those classes per row plan. N_q and N_kv "
    "of different classes are not compiled (the standard kernels' rows are padded to "
    "a multiple of 16 at every N)",
    "registers and local (spill) bytes per thread: cuobjdump --dump-resource-usage",
    "issue cycles: validate/issue.py (SASS replayed on one warp scheduler) with the "
    "latencies it takes from H200 micro-benchmarks (results/logs/"
    "*-cpi-probe.jsonl, *-lat-probe.jsonl)",
)


def row_plan_seqlens() -> list[int]:
    """One N of each alignment class for each row plan: a plan holds the N in
    (2^(k-1), 2^k] (it changes only at powers of two)."""
    out = set()
    k = 0
    while 1 << k <= MAX_SEQLEN:
        top = 1 << k
        out.update(top - less for less in UNALIGNED_BY if top - less > top // 2)
        k += 1
    return sorted(out)


def selectable_configs(algo: str, workload: Workload, gpu) -> list[KernelConfig]:
    """The configs a user selects without giving tiles: the default and the named ones
    that tilesim's kernels run here. Left out: those that do not fit the GPU, and those
    of another MMA path than the GPU's (FlashAttention-2's mma.sync tiles on Hopper are
    run by SDPA's CUDA kernel; Triton builds tilesim's with wgmma whatever the config)."""
    from ..traces import config as configs

    found = [configs.default_config(algo, workload, gpu)]
    for name in configs.NAMED_CONFIGS:
        try:
            found.append(configs.named_config(name, algo, workload, gpu))
        except TilesimError:
            continue
    out = []
    for c in found:
        try:
            configs.check_fits(algo, workload, c, gpu)
        except TilesimError:
            continue
        if c not in out and c.mma_path == compiled_path(algo, c, gpu):
            out.append(c)
    return out


def compiled_path(algo: str, config: KernelConfig, gpu) -> str:
    """The MMA path Triton builds a config's kernel with: wgmma on Hopper, except the
    released v1's 16-row steps, below a warpgroup's 64 (mma.sync everywhere)."""
    if algo == "v1" and config.v1_kernel == "released":
        return "mma_sync"
    return "wgmma" if gpu.has_wgmma else "mma_sync"


def selectable_cases(gpus) -> list[tuple[str, Workload, KernelConfig]]:
    """(algo, workload, config) covering every variant the CLI selects by default."""
    from ..traces.config import check_algo

    cases = []
    every = itertools.product(gpus, ALGOS, ("fwd", "bwd"), HEAD_DIMS, DTYPES, (False, True))
    for gpu, algo, pass_, d, dtype, causal in every:
        w = Workload(BATCH, PAPER_HIDDEN // d, 1024, 1024, d, causal, dtype, pass_)
        try:
            check_algo(algo, w, gpu)
        except TilesimError:
            continue
        seqlens = list(SEQLENS) + (row_plan_seqlens() if algo == "standard" else [])
        for c in selectable_configs(algo, w, gpu):
            for heads, n in itertools.product((PAPER_HIDDEN // d, 1), seqlens):
                shape = dataclasses.replace(w, heads=heads, seqlen_q=n, seqlen_kv=n)
                cases.append((algo, shape, c))
    return cases


def measured_cases() -> list[tuple[str, Workload, KernelConfig]]:
    """The (algo, workload, config) of every committed GPU register measurement."""
    cases, raw = [], results_paths.raw()
    paths = sorted(raw.glob("*-registers.json")) + sorted(raw.glob("*-ncu.json"))
    for path in paths:
        for case in json.loads(path.read_text())["cases"]:
            w, c = Workload(**case["workload"]), KernelConfig(**case["config"])
            cases.append((case["algo"], w, c))
    return cases


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class Collector:
    """Compiles cases, keeping the first kernel of each variant; the issue replay of
    each distinct SASS text is done once."""

    def __init__(self, log=print) -> None:
        self.entries: dict[Variant, KernelFacts] = {}
        self.failures: dict[Variant, str] = {}
        self.compiled = 0
        self._issue: dict = {}
        self._cubins: dict = {}
        self.log = log

    def add(self, algo: str, workload: Workload, config: KernelConfig, gpu) -> None:
        from ..traces import build
        from ..traces.compiled import variant_of
        from .cross_compile import compiled_launches

        try:
            launches = build(algo, workload, gpu, config, profile=None).launches
        except TilesimError as exc:
            self.log(f"skip {algo} {workload} {config}: {exc}")
            return
        variants = [variant_of(algo, workload, config, x.name) for x in launches]
        todo = {
            i for i, v in enumerate(variants) if v not in self.entries and v not in self.failures
        }
        if not todo:
            return
        try:
            kernels, n = compiled_launches(algo, workload, config, gpu, only=todo)
        except Exception as exc:  # the wrapper refused the config, or the compiler failed
            for i in todo:
                self.failures[variants[i]] = _first_line(exc)
            self.log(f"FAIL {algo} {workload.pass_} d={workload.head_dim} {config}: {exc}")
            return
        if n != len(launches):
            raise RuntimeError(
                f"{algo} {workload}: {n} kernel launches, the trace has {len(launches)}"
            )
        for i, _name, kernel_name, kernel in kernels:
            if isinstance(kernel, Exception):
                self.failures[variants[i]] = _first_line(kernel)
                continue
            masked = workload.causal or _masked_loop(launches[i])
            self.entries[variants[i]] = self._facts(kernel_name, kernel, config, masked)
            self.compiled += 1

    def _facts(self, kernel_name: str, kernel, config: KernelConfig, masked: bool) -> KernelFacts:
        from . import issue, sass
        from .cross_compile import resource_usage

        cubin = kernel.asm["cubin"]
        digest = hashlib.sha256(cubin).hexdigest()
        if digest not in self._cubins:  # the same kernel under other variants' keys
            text = sass.disassemble(cubin)
            self._cubins[digest] = (*resource_usage(cubin), text, sass.loops(text))
        regs, local, text, loops = self._cubins[digest]
        mma = [x for x in loops if any(op.startswith(MMA) for op in x["ops"])]
        inner = min(mma, key=lambda x: x["instructions"]) if mma else {}
        # the loop's blocks that forward branches skip run on some steps only: the Gluon
        # kernel's mask, and the released v1's (its steps at the diagonal, a partial last
        # block, the final store): replayed once per CTA, not every step
        key = (
            digest,
            config.num_warps,
            config.warp_specialize or config.v1_kernel == "released",
            int(masked),
        )
        if key not in self._issue:
            self._issue[key] = issue.kernel_issue(text, *key[1:]) or {}
        r = self._issue[key]
        return KernelFacts(
            kernel=kernel_name,
            registers_per_thread=regs,
            local_bytes_per_thread=local,
            spill_reload_covers=tuple(inner.get("spill_reload_waits", ())),
            issue_per_step_cycles=_rounded(r.get("loop", ())),
            issue_per_cta_cycles=_rounded(r.get("rest", r.get("kernel", ()))),
            sass_loop_instructions=tuple(x["instructions"] for x in loops),
        )


def profile_cases() -> tuple[list, list[tuple[str, Workload, KernelConfig]]]:
    """(the GPUs, the cases) the profile is compiled from, in its order: every variant
    the CLI selects on the H200 and the H100, then the measured ones."""
    from ..hwmodels import load_gpu

    gpus = [load_gpu(g) for g in ("h200", "h100")]
    return gpus, selectable_cases(gpus) + measured_cases()


def rebuild(targets: set[Variant], log=print) -> dict[Variant, KernelFacts]:
    """Compile ``targets`` again from the profile command's own cases, in its order (so
    each variant comes from the case that made it), and nothing else."""
    from ..traces import build
    from ..traces.compiled import variant_of

    gpus, cases = profile_cases()
    collector = Collector(log)
    left = set(targets)
    for algo, w, c in cases:
        if not left:
            break
        try:
            launches = build(algo, w, gpus[0], c, profile=None).launches
        except TilesimError:  # Collector.add skips these too
            continue
        if {variant_of(algo, w, c, x.name) for x in launches} & left:
            collector.add(algo, w, c, gpus[0])
            left -= set(collector.entries)
    if left:
        raise RuntimeError(f"{len(left)} variants not rebuilt: no case compiles them")
    return {v: collector.entries[v] for v in targets}


def _masked_loop(launch) -> bool:
    """Whether a CTA of ``launch`` runs a second K/V loop with MMAs beside its first: the
    masked blocks (causal: the diagonal; v2 at N not a multiple of block_n: the partial
    last block), whose issue beyond a step the replay charges once per CTA."""
    from ..traces.ir import Loop, Mma

    def mma_loops(ops):
        return sum(isinstance(op, Loop) and any(isinstance(x, Mma) for x in op.body) for op in ops)

    return any(mma_loops(role.ops) > 1 for role in launch.program.roles)


def _rounded(cycles) -> tuple[float, ...]:
    return tuple(round(float(x), ISSUE_DECIMALS) for x in cycles)


def build_profile(
    name: str, arch: str = "hopper", log=print, algos: tuple[str, ...] = ALGOS
) -> Profile:
    """Compile every case of ``algos`` (`profile_cases`) and return the profile."""
    from ..profiles import TARGETS
    from .cross_compile import toolchain

    gpus, every = profile_cases()
    collector = Collector(log)
    cases = [case for case in every if case[0] in algos]
    for i, (algo, w, c) in enumerate(cases):
        collector.add(algo, w, c, gpus[0])
        if i % 50 == 0:
            log(f"{i}/{len(cases)} cases, {len(collector.entries)} variants")
    tools = toolchain()
    provenance = Provenance(
        target=TARGETS[arch],
        toolchain=f"triton {tools['triton']}, ptxas {tools['ptxas']}",
        date=datetime.date.today().isoformat(),
        command="python -m tilesim.validate.profile " + " ".join(sys.argv[1:]),
        git_commit=metadata.git_commit() or "",
        notes=NOTES,
    )
    return Profile(name, arch, provenance, collector.entries, collector.failures)


def _merged(rebuilt: Profile, path: Path, algos: tuple[str, ...]) -> Profile:
    """The profile at ``path`` with its variants of ``algos`` replaced by ``rebuilt``'s."""
    from ..profiles import load

    old = load(path)
    keep = {v: f for v, f in old.entries.items() if v.algo not in algos}
    failed = {v: f for v, f in old.failures.items() if v.algo not in algos}
    p = rebuilt.provenance
    note = (
        f"{', '.join(algos)} rebuilt {p.date} at {p.git_commit or 'an unknown commit'}; "
        f"the rest from {old.provenance.date} at {old.provenance.git_commit or 'unknown'}"
    )
    provenance = dataclasses.replace(p, notes=(*p.notes, note))
    return Profile(
        rebuilt.name,
        rebuilt.arch,
        provenance,
        {**keep, **rebuilt.entries},
        {**failed, **rebuilt.failures},
    )


def differences(registers_file: Path) -> tuple[int, list[str]]:
    """Compile every case of a GPU registers file (``validate.gpu.registers``) on the CPU:
    (kernels compared, one line per kernel whose registers, spills or SASS loops differ)."""
    from ..hwmodels import load_gpu
    from . import sass
    from .cross_compile import compiled_launches, resource_usage

    gpu = load_gpu("h200")
    n, differ = 0, []
    for case in json.loads(registers_file.read_text())["cases"]:
        w, c = Workload(**case["workload"]), KernelConfig(**case["config"])
        kernels, count = compiled_launches(case["algo"], w, c, gpu)
        if count != len(case["kernels"]):
            differ.append(
                f"{case['algo']} {w}: {count} launches, the file has {len(case['kernels'])}"
            )
            continue
        for (_, launch, name, kernel), want in zip(kernels, case["kernels"], strict=True):
            n += 1
            if isinstance(kernel, Exception):
                differ.append(f"{case['algo']} {w} {launch}: {_first_line(kernel)}")
                continue
            regs, local = resource_usage(kernel.asm["cubin"])
            loops = sass.loops(sass.disassemble(kernel.asm["cubin"]))
            got = (launch, name, regs, local // 4, [x["instructions"] for x in loops])
            expected = (
                want["launch"],
                want["kernel"],
                want["registers_per_thread"],
                want["local_bytes_per_thread"],  # Triton's n_spills: 4-byte words
                [x["instructions"] for x in want["sass_loops"]],
            )
            if got != expected:
                differ.append(f"{case['algo']} {w} {launch}: {got} here, {expected} there")
    return n, differ


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tilesim.validate.profile")
    ap.add_argument("--out", type=Path, help="profiles/<target>-triton-<x.y>.json")
    ap.add_argument(
        "--check",
        type=Path,
        metavar="REGISTERS_JSON",
        help="instead compare CPU builds with a GPU's (results/raw/*-registers.json)",
    )
    ap.add_argument(
        "--algos",
        help="rebuild only these algorithms' variants (comma-separated) in the profile at --out",
    )
    args = ap.parse_args(argv)
    if args.check:
        n, differ = differences(args.check)
        print("\n".join(differ))
        print(f"{n} kernels compared, {len(differ)} differ")
        raise SystemExit(1 if differ else 0)
    if args.out is None:
        ap.error("--out or --check is required")
    algos = tuple(args.algos.split(",")) if args.algos else ALGOS
    if not set(algos) <= set(ALGOS):
        ap.error(f"--algos: each of {', '.join(ALGOS)}, got {args.algos!r}")
    profile = build_profile(args.out.stem, log=lambda *a: print(*a, file=sys.stderr), algos=algos)
    if algos != ALGOS:
        profile = _merged(profile, args.out, algos)
    write(profile, args.out)
    print(
        f"wrote {args.out}: {len(profile.entries)} variants, {len(profile.failures)} failed "
        "to compile"
    )


if __name__ == "__main__":
    main()
