"""Wall time of ``dlnm reproduce --quick`` (every diagonal-network figure, compile time included) and of the
figures one by one; the ``--full`` estimates are derived from these and written in ``benchmarks/README.md``.

Target (issue: paper figures): ``--quick`` for all figures together under 10 minutes on 2 cores, compile
time included. Run in a fresh process so that compilation is counted:

    python -m pytest benchmarks/bench_figures.py --benchmark-only -s
"""

import time

from dlnmomentum.figures import FIGURES, compute_figure, plot_store

QUICK_TARGET_SECONDS = 600.0


def test_reproduce_quick(benchmark, tmp_path, machine):
    times = {}

    def run():
        out = tmp_path / "figures"
        for name in FIGURES:
            t0 = time.perf_counter()
            path, _ = compute_figure(name, "quick", str(out), overwrite=True, log=lambda *_: None)
            plot_store(path)
            times[name] = time.perf_counter() - t0

    benchmark.pedantic(run, rounds=1, iterations=1)
    total = sum(times.values())
    print(f"\n{machine}: dlnm reproduce --quick {total:.0f} s; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    benchmark.extra_info.update(machine=machine, seconds=times, total=total)
    assert total < QUICK_TARGET_SECONDS
