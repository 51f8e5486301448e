"""Invariants of the kernels' shared definitions: layouts, the padding rule, status codes, module homes."""

import ast
import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

import dlnmomentum as dm
from dlnmomentum import kernels
from dlnmomentum.kernels import flow, flow_sweep, layout, mgd, status, sweep, vec_ir
from dlnmomentum.kernels.config import JIT_OPTIONS

KERNELS_DIR = os.path.dirname(kernels.__file__)

MGD_FLOAT_ROWS = ("W_PLUS", "W_MINUS", "W_PLUS_PREV", "W_MINUS_PREV", "S_SUM_PLUS", "S_SUM_MINUS", "S_COMP_PLUS",
                  "S_COMP_MINUS", "GRAD_MOMENTUM", "MIRROR_SUM", "MIRROR_COMP", "MIN_DELTA")
MGD_INT_ROWS = ("CROSS_PLUS", "CROSS_MINUS", "FIRST_CROSS_PLUS", "FIRST_CROSS_MINUS", "LAST_CROSS_PLUS",
                "LAST_CROSS_MINUS")
REC_VECTORS = ("REC_THETA", "REC_W_PLUS", "REC_W_MINUS", "REC_DELTA")
MODES = ("MODE_HESSIAN", "MODE_DATA", "MODE_MINIBATCH")
STATUS_NAMES = ("RUNNING", "CONVERGED", "MAX_STEPS", "DIVERGED", "INTERRUPTED", "STALLED")


def _values(module, names):
    return [getattr(module, name) for name in names]


def _dense(values, count):
    """Distinct indices covering 0 .. count-1 exactly."""
    return sorted(values) == list(range(count))


def test_mgd_state_rows_are_distinct_and_dense():
    assert _dense(_values(layout, MGD_FLOAT_ROWS), layout.N_FLOAT_ROWS)
    assert _dense(_values(layout, MGD_INT_ROWS), layout.N_INT_ROWS)
    assert _dense(_values(layout, REC_VECTORS), layout.N_REC_VECTORS)
    assert len(set(_values(layout, MODES))) == len(MODES)


def test_flow_state_rows_are_distinct_and_dense():
    rk = ("W_PLUS", "W_MINUS", "V_PLUS", "V_MINUS", "J_PLUS", "J_MINUS", "K_PLUS", "K_MINUS", "P_INT", "Q_INT",
          "G2_INT")
    book = ("MIN_DELTA", "MAX_W2", "FIRST_CROSS_PLUS", "FIRST_CROSS_MINUS", "LAST_CROSS_PLUS", "LAST_CROSS_MINUS")
    assert _dense(_values(flow, rk), flow.N_RK_ROWS)
    assert _dense(_values(flow, rk + book), flow.N_FLOAT_ROWS)
    assert _dense(_values(flow, ("CROSS_PLUS", "CROSS_MINUS")), flow.N_INT_ROWS)
    assert _dense(_values(flow, ("STEPS_DONE", "N_CROSSINGS")), flow.N_COUNTERS)


def test_flow_work_array_rows_tile_a_block():
    """The row groups of one block of the RK4 work array neither overlap nor leave gaps."""
    n_stage_inputs = 7  # w±, ẇ±, K±, Q: the components whose stage input is fed back
    stage_slots = (flow._S_WP, flow._S_WM, flow._S_VP, flow._S_VM, flow._S_KP, flow._S_KM, flow._S_Q)
    assert _dense(stage_slots, n_stage_inputs)
    rows = []
    for start, count in ((flow._Y, flow.N_RK_ROWS), (flow._S, n_stage_inputs), (flow._A, flow.N_RK_ROWS),
                         (flow._N, flow.N_RK_ROWS)):
        rows += range(start, start + count)
    rows += [flow._VALID_P, flow._VALID_M, flow._MIN_DELTA, flow._MAX_W2]
    assert _dense(rows, flow._NR)


def test_sweep_frame_slots_are_distinct_and_dense():
    slots = [value for name, value in vars(sweep).items()
             if name.startswith("S_") and not hasattr(layout, name)]  # not the imported MGD rows S_SUM_* etc.
    assert _dense(slots, sweep.NSLOT)
    assert sweep.FR == sweep.NSLOT * sweep.LW
    assert _dense([sweep.LP_GAMMA, sweep.LP_BETA], sweep.N_LANE_PARAMS)


def test_layout_names_stay_importable_from_their_old_homes():
    """The Python layer reads the layouts as ``kernels.mgd.<NAME>``: the same values as :mod:`.layout`'s."""
    for name in MGD_FLOAT_ROWS + MGD_INT_ROWS + REC_VECTORS + MODES + (
            "N_FLOAT_ROWS", "N_INT_ROWS", "N_REC_VECTORS", "PAD"):
        assert getattr(mgd, name) == getattr(layout, name), name
    for name in ("LW", "TILE"):
        assert getattr(sweep, name) == getattr(vec_ir, name), name
    assert flow_sweep.LANES == vec_ir.LW
    assert flow._hermite_crossings is not None and flow._hermite is not None
    assert kernels.drop_stale_caches is not None


@given(st.integers(0, 10**6), st.integers(1, 64))
def test_round_up(n, multiple):
    r = layout.round_up(n, multiple)
    assert r % multiple == 0 and n <= r < n + multiple
    assert r == math.ceil(n / multiple) * multiple
    assert layout.round_up(r, multiple) == r


def test_round_up_compiles_to_the_same_rule():
    @njit(**dict(JIT_OPTIONS, cache=False))
    def rounded(ns, multiple, out):
        for i in range(ns.shape[0]):
            out[i] = layout.round_up(ns[i], multiple)

    ns = np.arange(0, 100, dtype=np.int64)
    for multiple in (1, 6, 16):
        out = np.empty_like(ns)
        rounded(ns, multiple, out)
        assert out.tolist() == [layout.round_up(int(n), multiple) for n in ns]


@pytest.mark.filterwarnings("ignore:d = .* the network is not overparametrised")
@pytest.mark.parametrize("d", [1, 5, 13, 16, 17, 30, 32, 33])
def test_padded_widths_follow_the_padding_rule(d):
    problem = dm.sparse_regression(n=8, d=d, s=1, n_test=0, seed=0)
    X, XT, H, b = problem.padded
    dp = H.shape[0]
    assert dp % layout.PAD == 0 and d <= dp < d + layout.PAD
    assert X.shape[1] == XT.shape[0] == H.shape[1] == b.shape[0] == dp
    assert dp % flow.BLOCK == 0  # the flow kernel's work array is made of whole blocks


def test_flow_block_divides_pad():
    assert layout.PAD % flow.BLOCK == 0


@pytest.mark.parametrize("n, d", [(1, 1), (20, 30), (7, 32), (40, 7)])
def test_lockstep_sizes_are_tile_multiples(n, d):
    frames = sweep.frames_for(n, d)
    assert frames % sweep.TILE == 0 and frames >= max(n, d) and frames < max(n, d) + sweep.TILE
    nt, dpt = flow_sweep.padded_rows(n, layout.round_up(d, layout.PAD))
    assert nt % sweep.TILE == 0 and dpt % sweep.TILE == 0


def test_kernel_modules_use_the_one_status_table():
    for module in (mgd, flow, flow_sweep, sweep):
        for name in STATUS_NAMES:
            if hasattr(module, name):
                assert getattr(module, name) == getattr(status, name), (module.__name__, name)
    assert [code for code, _, _ in status.TABLE] == _values(status, STATUS_NAMES) == list(range(len(STATUS_NAMES)))


def test_shared_constants_are_defined_once():
    """No kernel module re-declares a status code or a shared layout name: they import them.

    (The MGD state rows are left out: the flow kernel has its own rows, some of the same names.)
    """
    homes = {"status.py": set(STATUS_NAMES),
             "layout.py": set(MODES + REC_VECTORS + ("N_REC_VECTORS", "PAD", "round_up"))}
    for name in sorted(os.listdir(KERNELS_DIR)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(KERNELS_DIR, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        defined = {target.id for node in tree.body if isinstance(node, ast.Assign)
                   for target in node.targets if isinstance(target, ast.Name)}
        defined |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        for home, names in homes.items():
            if name != home:
                assert not defined & names, (name, defined & names)


@pytest.mark.filterwarnings("ignore:d = .* the network is not overparametrised")
def test_kernels_return_the_status_codes(problem):
    # the kernels' return codes, through the single-run, heavy-ball and lockstep kernels
    assert dm.mgd(problem, 0.01, 0.5, steps=10).status == status.MAX_STEPS
    assert dm.mgd(problem, 5.0, 0.9, steps=2000, alpha=1.0).status == status.DIVERGED
    small = dm.sparse_regression(n=40, d=7, s=3, n_test=11, seed=3)
    assert dm.mgd(small, 0.05, 0.5, steps=20000, tol=1e-6).status == status.CONVERGED
    assert dm.mgf(problem, 0.5, t_max=1.0).status == status.MAX_STEPS
    A = np.eye(3)
    c = np.ones(3)
    assert mgd._heavy_ball_quadratic(A, c, 0.1, 0.5, np.zeros(3), np.zeros(3), 5) == status.RUNNING
    assert mgd._heavy_ball_quadratic(A, c, 10.0, 0.5, np.zeros(3), np.zeros(3), 500) == status.DIVERGED
    sw = dm.sweep(small, gammas=[0.05, 5.0], betas=[0.5], steps=20000, tol=1e-6)
    assert sorted(np.unique(sw["status"]).tolist()) == [status.CONVERGED, status.DIVERGED]
