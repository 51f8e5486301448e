"""The public API at the edges of its documented ranges, checked against independent references (plain NumPy)."""

import re

import numpy as np

import dlnmomentum as dm


def test_a_diverged_runs_summary_does_not_print_theorem_2_quantities_as_results():
    """`dlnm run --gamma 5 --beta 0.5 --steps 10` printed `S+ (mean) : -1.38e58` and `|theta0~|max : inf` as if they
    were Theorem 2's quantities: a diverged run has no limit, so the summary says n/a and why."""
    res = dm.mgd(dm.sparse_regression(seed=0), 5.0, 0.5, steps=10)
    assert res.status_name == "diverged"
    # the fields still hold the last iterate's values (NumPy: some overflowed or are far out of any sensible range)
    assert not np.all(np.isfinite(res.theta0_tilde)) or np.abs(res.s_plus).max() > 1e30
    text = res.summary()
    for label in ("|Delta_inf|", "S+- (mean)", "|theta0~|max"):
        line = next(x for x in text.splitlines() if x.startswith(label))
        assert "n/a (the run diverged" in line, line
    assert not re.search(r"S[+-] \(mean\)\s*:\s*[-0-9]", text) and "theta0~|max : inf" not in text
    assert "this run diverged after" in text and "Theorem 2" in text
    # a run that did not diverge still prints them
    ok = dm.mgd(dm.sparse_regression(seed=0), 0.05, 0.5, steps=10)
    assert re.search(r"S\+ \(mean\)\s*: [-0-9]", ok.summary()) and "n/a" not in ok.summary()
