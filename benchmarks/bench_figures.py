"""Wall time of ``dlnm reproduce --quick`` and ``--full`` (every figure: its stores, PNG and PDF, compile time
included), figure by figure; the figures are those of ``dlnm reproduce``, in its order, so a sweep two figures
share is counted in the first that needs it.

Targets: ``--quick`` under 10 minutes on 2 cores (issue 11); ``--full`` under 45 minutes on 2 cores (issue 22).
Run in a fresh process so that compilation is counted; ``--full`` (the paper's sizes) only with
``DLNM_BENCH_FULL=1``:

    python -m pytest benchmarks/bench_figures.py --benchmark-only -s
    DLNM_BENCH_FULL=1 python -m pytest benchmarks/bench_figures.py --benchmark-only -s -k full
"""

import os
import time

import pytest

from dlnmomentum.figures import FIGURES, compute_figure, plot_store

QUICK_TARGET_SECONDS = 600.0
FULL_TARGET_SECONDS = 45 * 60.0


def _reproduce(benchmark, out, size, machine):
    """Every figure at ``size`` into ``out``, timed one by one (compute and draw); the times by name."""
    times = {}

    def run():
        for name in FIGURES:
            t0 = time.perf_counter()
            path, _ = compute_figure(name, size, str(out), overwrite=True, log=lambda *_: None)
            plot_store(path)
            times[name] = time.perf_counter() - t0
            print(f"  {name} [{size}]: {times[name]:.1f} s", flush=True)

    benchmark.pedantic(run, rounds=1, iterations=1)
    total = sum(times.values())
    print(f"\n{machine}: dlnm reproduce --{size} {total:.0f} s; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    benchmark.extra_info.update(machine=machine, seconds=times, total=total)
    return total


def test_reproduce_quick(benchmark, tmp_path, machine):
    assert _reproduce(benchmark, tmp_path / "figures", "quick", machine) < QUICK_TARGET_SECONDS


@pytest.mark.skipif(os.environ.get("DLNM_BENCH_FULL") != "1", reason="the paper's sizes: DLNM_BENCH_FULL=1")
def test_reproduce_full(benchmark, tmp_path, machine):
    # DLNM_BENCH_FULL_OUT keeps the stores (for scripts/findings.py) instead of a temporary folder
    out = os.environ.get("DLNM_BENCH_FULL_OUT") or str(tmp_path / "figures")
    assert _reproduce(benchmark, out, "full", machine) < FULL_TARGET_SECONDS
