"""The one way from a shape to a prediction: a `Job`, simulated alone (`predict`), many at
once (`run_jobs`: serially, over local processes or a Dask cluster, cached on disk) or in
the background beside a GPU run (`Pool`).

`run_jobs` takes a list of `Job`s (a GPU, an algorithm, a workload, optionally a
kernel config, the fidelity and an SM clock) and returns one `Outcome` per job, in job
order, whatever order the workers finish in — so a sweep's output does not
depend on the runner. The parent process builds every trace (cheap: a trace is
a template) and so learns each job's cache key before any simulation; only the
simulations travel to the workers, and each distinct key is simulated once,
the longest first (`work_estimate`), so that no worker is left with a long one
at the end while the others idle.

The cache (`tilesim.cache`) is written by the parent as each result comes back, so
an interrupted sweep keeps what it finished and the next run resumes.

Runners:

* ``workers <= 1`` and no scheduler: in this process, one after another.
* ``workers > 1``: a `ProcessPoolExecutor` of that many processes (forked where the
  platform can; `Pool` spawns, for a process beside CUDA).
* ``scheduler="local-dask"``: a Dask `LocalCluster` of ``max(2, workers)`` worker
  processes (one thread each), started and stopped here.
* ``scheduler="tcp://host:8786"``: a running Dask scheduler (see docs/cluster.md).
  A `distributed.Client` may be passed too.

Dask is the optional extra ``cluster``; it is imported only when asked for.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from .cache import Cache, cache_key
from .errors import TilesimError
from .hwmodels.gpu import GPU
from .simulator import Prediction, simulate
from .traces import EXTERNAL, build, build_external, compiled
from .traces.expr import evaluate
from .traces.ir import Loop, Trace
from .traces.workload import KernelConfig, Workload

DEFAULT_CACHE_DIR = ".tilesim-cache"
LOCAL_DASK = "local-dask"
DASK_SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")
DASK_CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class Job:
    """One prediction to make: every path from a shape to a `Prediction` goes through one.

    ``algo``: an algorithm, or an external kernel whose schedule tilesim has
    (``traces.EXTERNAL``: its config is its own). ``clock_hz``: predict with the SMs at
    this clock (`GPU.at_clock`: the one read while a measured point was timed) instead of
    the preset's; ``counted``: that clock was read by the SMs' own cycle counters
    (`GPU.at_counted_clock`). ``profile``: the kernel profile the trace takes its compiled
    facts from (`traces.build`).
    """

    gpu: GPU
    algo: str
    workload: Workload
    config: KernelConfig | None = None  # None: the algorithm's default for this GPU
    fidelity: str = "fast"
    clock_hz: float | None = None
    counted: bool = False
    profile: object = compiled.DEFAULT

    def hardware(self) -> GPU:
        """The GPU the job runs on: ``gpu`` at ``clock_hz`` where one is given."""
        if not self.clock_hz:
            return self.gpu
        if self.counted:
            return self.gpu.at_counted_clock(self.clock_hz)
        return self.gpu.at_clock(self.clock_hz)

    def trace(self, gpu: GPU | None = None) -> Trace:
        """The job's trace on ``gpu`` (default: `hardware`)."""
        gpu = gpu or self.hardware()
        if self.algo in EXTERNAL:
            return build_external(self.algo, self.workload, gpu, self.profile)
        return build(self.algo, self.workload, gpu, self.config, self.profile)


def predict(job: Job, **recording) -> Prediction:
    """Simulate one job here and now (``recording``: `simulate`'s timeline options)."""
    gpu = job.hardware()
    return simulate(job.trace(gpu), gpu, job.fidelity, **recording)


@dataclass(frozen=True)
class Outcome:
    """The prediction of one job, or the one-line reason there is none."""

    prediction: Prediction | None
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.prediction is not None


@dataclass(frozen=True)
class RunStats:
    jobs: int
    simulated: int  # distinct simulations run now
    cached: int  # jobs answered from the cache
    failed: int  # jobs with an error


# -- the work a worker does -----------------------------------------------------------


def work_estimate(trace: Trace, fidelity: str = "fast") -> int:
    """A rough figure of what simulating ``trace`` costs: each launch's CTAs times the
    steps of their roles (loops cut as ``fidelity`` cuts them, trip counts at the
    first grid coordinates). Only for ordering work, longest first."""
    from .simulator.steps import StepTables

    tables = StepTables(fidelity)

    def steps(ops, env: dict) -> int:
        n = 0
        for op in ops:
            if isinstance(op, Loop):
                trips = max(evaluate(op.trips, env), 0)
                nested = any(isinstance(x, Loop) for x in op.body)
                inner = {**env, op.var: 0}
                n += len(tables.table(trips, nested)) * (1 + steps(op.body, inner))
            else:
                n += 1
        return n

    total = 0
    for launch in trace.launches:
        env = {**trace.params, **{name: 0 for name, _ in launch.grid}}
        total += launch.num_ctas * sum(steps(role.ops, env) for role in launch.program.roles)
    return total


def simulate_payload(payload: tuple) -> dict:
    """Run one simulation: ``(gpu, trace, fidelity) -> {"prediction": {...}} | {"error": ...}``.

    Module-level so that process pools and Dask workers can import it. The
    prediction's ``sim_wall_s`` (the one field that differs between two runs) is
    set to 0 so that a result is the same bytes whichever process made it.
    """
    gpu, trace, fidelity = payload
    try:
        pred = simulate(trace, gpu, fidelity)
    except TilesimError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # a bug in the engine must not sink a whole sweep
        return {"error": f"internal error: {type(exc).__name__}: {exc}"}
    d = pred.to_dict()
    d["sim_wall_s"] = 0.0
    return {"prediction": d}


# -- runners ------------------------------------------------------------------------------


def _serial(payloads: dict) -> Iterator[tuple[str, dict]]:
    for key, payload in payloads.items():
        yield key, simulate_payload(payload)


def _pool(payloads: dict, workers: int) -> Iterator[tuple[str, dict]]:
    ex = ProcessPoolExecutor(
        max_workers=workers, mp_context=_mp_context(), initializer=_ignore_sigint
    )
    try:
        futures = {ex.submit(simulate_payload, p): k for k, p in payloads.items()}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    except BaseException:  # Ctrl-C, or the caller stopped early: do not wait for the rest
        _kill(ex)
        ex.shutdown(wait=False, cancel_futures=True)
        # let its manager thread finish closing its wakeup pipe now: at exit, Python 3.11's
        # concurrent.futures writes to that pipe and races the close ("Bad file descriptor")
        manager = getattr(ex, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=5)
        raise
    else:
        ex.shutdown(wait=True)


def _kill(ex: ProcessPoolExecutor) -> None:
    """End a pool's workers now, running simulations included (no public handle on them)."""
    for process in list(getattr(ex, "_processes", {}).values()):
        process.kill()


def _ignore_sigint() -> None:
    """Ctrl-C reaches the whole process group: the parent answers it, the workers must not."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _mp_context():
    """fork where there is one: a script calling `run_jobs` needs no ``__main__`` guard (spawn
    re-imports the script in every worker). The workers only simulate — no CUDA, no locks
    of the parent's threads — which is what makes fork safe here."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


@contextmanager
def dask_client(scheduler, workers: int = 2):
    """A `distributed.Client` for ``"local-dask"``, an address, or an existing client."""
    if not isinstance(scheduler, str):
        yield scheduler  # a Client given by the caller, who closes it
        return
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise TilesimError(
            "--scheduler needs Dask's distributed scheduler: pip install tilesim[cluster]"
        ) from None
    if scheduler == LOCAL_DASK:
        cluster = LocalCluster(
            n_workers=max(2, workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
        return
    if not scheduler.startswith(DASK_SCHEMES):
        raise TilesimError(
            f"--scheduler {scheduler!r} is neither {LOCAL_DASK!r} nor a Dask address "
            "like tcp://host:8786"
        )
    try:
        client = Client(scheduler, timeout=f"{DASK_CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError) as exc:
        raise TilesimError(
            f"cannot reach the Dask scheduler at {scheduler} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no answer'})"
        ) from None
    try:
        yield client
    finally:
        client.close()


def _dask(payloads: dict, client) -> Iterator[tuple[str, dict]]:
    from dask.distributed import as_completed as dask_completed

    # the cache key names the task: equal work has an equal name on the cluster too
    futures = {
        client.submit(simulate_payload, p, key=f"tilesim-sim-{k}", pure=False): k
        for k, p in payloads.items()
    }
    try:
        for fut in dask_completed(list(futures)):
            yield futures[fut], fut.result()
    finally:
        for fut in futures:
            fut.release()


# -- the entry point ------------------------------------------------------------------


def run_jobs(
    jobs: Sequence[Job],
    *,
    workers: int = 1,
    scheduler=None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = False,
    on_result: Callable[[int, Outcome], None] | None = None,
) -> tuple[list[Outcome], RunStats]:
    """Predict every job; outcomes come back in job order (see the module docstring).

    ``on_result(index, outcome)`` is called as each job is answered (a test hook,
    and the way to stop a sweep part-way: what was answered stays cached).
    """
    cache = Cache(cache_dir) if cache_dir is not None else None
    outcomes: list[Outcome | None] = [None] * len(jobs)
    pending: dict[str, tuple] = {}  # key -> payload, in job order
    waiting: dict[str, list[int]] = {}  # key -> indices of the jobs it answers
    cached = 0

    def answer(i: int, outcome: Outcome) -> None:
        outcomes[i] = outcome
        if on_result is not None:
            on_result(i, outcome)
        bar.advance()

    with _Bar(progress, len(jobs)) as bar:
        for i, job in enumerate(jobs):
            try:
                gpu = job.hardware()
                trace = job.trace(gpu)
            except TilesimError as exc:
                answer(i, Outcome(None, str(exc)))
                continue
            key = cache_key(gpu, trace, job.fidelity)
            if key in waiting:
                waiting[key].append(i)
                continue
            stored = cache.get(key) if cache is not None else None
            if stored is not None:
                try:
                    pred = Prediction.from_dict(stored)
                except (TilesimError, TypeError, KeyError, ValueError, AttributeError):
                    pred = None  # an entry of another schema: simulate again
                if pred is not None:
                    cached += 1
                    answer(i, Outcome(pred, None, cached=True))
                    continue
            pending[key] = (gpu, trace, job.fidelity)
            waiting[key] = [i]
        if len(pending) > 1:  # the longest first (ties in job order)
            cost = {k: work_estimate(p[1], p[2]) for k, p in pending.items()}
            pending = dict(sorted(pending.items(), key=lambda kv: -cost[kv[0]]))

        if pending:
            for key, result in _results(pending, workers, scheduler):
                if "prediction" in result:
                    if cache is not None:
                        cache.put(key, result["prediction"])
                    outcome = Outcome(Prediction.from_dict(result["prediction"]))
                else:
                    outcome = Outcome(None, result["error"])
                for i in waiting[key]:
                    answer(i, outcome)

    final = [o for o in outcomes if o is not None]
    assert len(final) == len(jobs)
    stats = RunStats(
        jobs=len(jobs),
        simulated=len(pending),
        cached=cached,
        failed=sum(1 for o in final if not o.ok),
    )
    return final, stats


class Pool:
    """Predictions made in the background while the caller works on: `submit` builds a
    job's trace here and simulates it in one of ``workers`` processes started by spawn
    (safe beside a CUDA context and its threads, where fork is not). A future's result
    is `simulate_payload`'s: ``{"prediction": Prediction.to_dict()}`` or ``{"error": ...}``.
    """

    def __init__(self, workers: int) -> None:
        self._ex = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_ignore_sigint,
        )

    def submit(self, job: Job) -> Future:
        try:
            gpu = job.hardware()
            payload = (gpu, job.trace(gpu), job.fidelity)
        except TilesimError as exc:
            failed: Future = Future()
            failed.set_result({"error": str(exc)})
            return failed
        return self._ex.submit(simulate_payload, payload)

    def stop(self, shutdown: bool = True) -> None:
        """Kill the workers, running jobs included, then shut the pool down.

        A shutdown alone waits for running jobs at exit, and a worker orphaned by a parent
        that ends with ``os._exit`` waits forever on its queue (holding the parent's stdout
        open). ``shutdown=False`` only kills: for a process about to ``os._exit`` from
        another thread (shutting down can block there)."""
        _kill(self._ex)
        if shutdown:
            self._ex.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _results(pending: dict, workers: int, scheduler) -> Iterator[tuple[str, dict]]:
    if scheduler is not None:
        with dask_client(scheduler, workers) as client:
            yield from _dask(pending, client)
    elif workers > 1 and len(pending) > 1:
        yield from _pool(pending, min(workers, len(pending)))
    else:
        yield from _serial(pending)


class _Bar:
    """A rich progress bar on stderr (or nothing)."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled and total > 1
        self.total = total
        self._progress = None
        self._task = None
        self._ctx = nullcontext()

    def __enter__(self):
        from rich.console import Console

        console = Console(stderr=True)
        if self.enabled and console.is_terminal:  # a log file gets no bar (nor its blank line)
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._progress = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._ctx = self._progress
            self._ctx.__enter__()
            self._task = self._progress.add_task("predicting", total=self.total)
        return self

    def advance(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)
