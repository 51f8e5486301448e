"""The paper's diagonal-network figures: a thin wrapper of ``dlnm reproduce`` (kept for old instructions).

    python scripts/paper_figures.py [--quick | --full | --tiny] [--out figures/] [--only NAME ...]

is ``dlnm reproduce`` with the same flags: every figure is computed into ``<out>/<name>.h5`` (its sweeps
resumable under ``<out>/parts``), drawn to PNG and PDF, and reports the status of its runs. Before
0.4.0 this script stopped MGF runs at t = 2000 (train loss about 1e-6) without saying so; see
``docs/findings.md``.
"""

import sys

from dlnmomentum.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", *sys.argv[1:]]))
