"""Sweeps of many points: the per-wave work is done once per wave (not per point, per chunk or per file byte),
and a wave's memory is bounded; every result bit stays that of the single runs."""

import itertools
import tracemalloc
import warnings

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.kernels import layout as KL
from dlnmomentum.runs.mgd import derived_fields, initial_state
from dlnmomentum.runs.points import FIELDS, SCALAR_FIELDS, VECTOR_FIELDS, point_columns
from dlnmomentum.store import global_heap
from dlnmomentum.store.sweep_format import SweepFile, _touched_chunks
from dlnmomentum.sweeps import lockstep
from dlnmomentum.sweeps.plan import Plan, make_config

SPEC = {"n": 20, "d": 30, "s": 5}


def test_derived_fields_of_many_states_are_those_of_each_state():
    # a wave's states in one call: each point's fields the bits of its own call (the single run's)
    rng = np.random.default_rng(0)
    d, npts = 7, 5
    w0p, w0m = np.full(d, 0.3), np.full(d, 0.2)
    fstates, istates = initial_state(w0p, w0m, count=npts)
    fstates[:] = rng.normal(size=fstates.shape)
    fstates[2, KL.W_PLUS, 3] = 0.0  # log of 0: -inf, then inf/NaN, as in the single run
    istates[1, KL.CROSS_MINUS, 4] = 2
    betas = np.array([0.0, 0.5, 0.9, 0.99, 0.3])
    with np.errstate(all="ignore"):
        many = derived_fields(fstates, istates, betas, w0p, w0m)
        for i in range(npts):
            one = derived_fields(fstates[i].copy(), istates[i].copy(), float(betas[i]), w0p, w0m)
            for name, value in one.items():
                if name == "crossed":
                    assert isinstance(value, bool) and value == bool(many[name][i])
                else:
                    assert many[name][i].tobytes() == value.tobytes(), name
            # the formulas of the docstring, in plain NumPy
            wp, wm = fstates[i, KL.W_PLUS], fstates[i, KL.W_MINUS]
            s_plus = ((fstates[i, KL.S_SUM_PLUS] + fstates[i, KL.S_COMP_PLUS]) / (1.0 - betas[i])
                      - np.log(np.abs(wp / w0p)))
            assert np.array_equal(many["s_plus"][i], s_plus, equal_nan=True)
            assert np.array_equal(many["theta"][i], 0.25 * (wp * wp - wm * wm))
    assert many["crossed"].tolist() == [False, True, False, False, False]


def test_point_columns_are_the_fields_point_by_point():
    d = 3
    points = [{name: (np.arange(d) + k if name in VECTOR_FIELDS else k) for name in FIELDS} for k in range(4)]
    del points[2]["prediction_gap"]  # a field a point lacks: NaN
    cols = point_columns(points)
    assert set(cols) == set(FIELDS)
    for name in FIELDS:
        dtype = (SCALAR_FIELDS.get(name) or VECTOR_FIELDS[name])[0]
        want = np.asarray([p.get(name, np.nan) for p in points], dtype=dtype)
        assert cols[name].dtype == want.dtype and np.array_equal(cols[name], want, equal_nan=True)
    assert point_columns(cols) is cols


@pytest.mark.parametrize("shape, chunks", [((3, 7, 5), (1, 1, 5)), ((3, 7, 5, 4), (1, 1, 5, 4)),
                                           ((4, 11), (1, 11)), ((1, 9), (1, 9)), ((3, 7, 5), (2, 3, 5))])
def test_touched_chunks_are_whole_chunks_merged_into_few_writes(shape, chunks):
    grid = shape[:2] if len(shape) == 2 else shape[:3]
    npts = int(np.prod(grid))
    all_chunks = [tuple(slice(k * c, min(k * c + c, n)) for k, c, n in zip(key, chunks, shape, strict=True))
                  for key in itertools.product(*(range(-(-n // c)) for n, c in zip(shape, chunks, strict=True)))]
    rng = np.random.default_rng(1)
    waves = [np.arange(npts), np.arange(3, npts - 4), np.sort(rng.choice(npts, 6, replace=False))]
    for wave in waves:
        idx = np.unravel_index(wave, grid)
        sels = list(_touched_chunks(shape, chunks, idx))
        covered = np.zeros(shape, dtype=int)
        for sel in sels:
            covered[sel] += 1
        touched = np.zeros(shape, dtype=bool)
        touched[idx] = True
        # exactly the chunks holding a point of the wave, each once, each whole
        for c in all_chunks:
            want = int(touched[c].any())
            assert np.all(covered[c] == want)
        # consecutive chunks along the last axis cut into chunks are one selection: a wave of consecutive
        # points is written in one selection per run of chunks, not one per chunk
        if len(wave) == npts and chunks[:2] == (1, 1) and len(grid) == 3:
            assert len(sels) == shape[0]
        if len(wave) == npts and len(grid) == 2:
            assert len(sels) == 1


def test_waves_of_short_runs_are_bounded_in_memory_and_keep_the_bits(monkeypatch):
    problem = dm.sparse_regression(**SPEC, seed=0)
    kw = dict(gammas=np.geomspace(1e-3, 1.0, 24), betas=np.linspace(0.0, 0.95, 20), steps=30, reps=1,
              progress=False)
    whole = dm.sweep(problem, wave_size=480, **kw)  # one wave
    plan_engine = {}
    orig = lockstep.LockstepEngine.run_wave

    def run_wave(self, points, flag, bar):
        plan_engine.setdefault("sizes", []).append(len(points))
        plan_engine["cap"] = self.max_wave_points()
        return orig(self, points, flag, bar)

    monkeypatch.setattr(lockstep.LockstepEngine, "run_wave", run_wave)
    monkeypatch.setattr(lockstep, "WAVE_STATE_BYTES", 64 * lockstep.LockstepEngine(
        Plan(*_config(problem, kw)), 8).wave_bytes_per_point())
    cut = dm.sweep(problem, **kw)
    unit = 8 * lockstep.threads()
    assert plan_engine["cap"] == 64
    assert len(plan_engine["sizes"]) > 1 and max(plan_engine["sizes"]) <= max(64 // unit * unit, unit)
    for name in FIELDS:
        assert whole[name].tobytes() == cut[name].tobytes(), name


def _config(problem, kw):
    return make_config(problem, kw["gammas"], kw["betas"], None, kw["steps"], None, kw["reps"], None, 0, None, 0.01,
                       False, "auto", False, 1e-8)


def test_wave_state_estimate_covers_what_a_wave_allocates():
    problem = dm.sparse_regression(**SPEC, seed=0)
    kw = dict(gammas=np.geomspace(1e-3, 1e-1, 32), betas=np.linspace(0.0, 0.9, 32), steps=3, reps=1)
    engine = lockstep.LockstepEngine(Plan(*_config(problem, kw)), 8)
    points = list(range(1024))
    engine.run_wave(points[:16], {"signum": None}, None)  # (loads the kernel)
    tracemalloc.start()
    try:
        engine.run_wave(points, {"signum": None}, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    per_point = engine.wave_bytes_per_point()
    assert per_point * len(points) <= peak <= 1.25 * per_point * len(points) + (1 << 20)


def test_a_sweep_writer_scans_its_store_once_not_before_every_wave(tmp_path, monkeypatch):
    # the scan for damaged global heaps reads the whole file: once per wave made a sweep quadratic in its size
    scans = []
    orig = global_heap.scan
    monkeypatch.setattr(global_heap, "scan", lambda *a: scans.append(a[1]) or orig(*a))
    path = str(tmp_path / "s.h5")
    sw = dm.sweep(SPEC, gammas=np.geomspace(1e-3, 1e-1, 16), betas=np.linspace(0.0, 0.9, 12), steps=10,
                  wave_size=16, store=path, progress=False)
    assert sw.complete
    assert len(scans) <= 3  # the new store, the session start, the final read: not one per wave (12 waves)
    # a file changed by another hand is scanned again
    with open(path, "r+b") as fh:
        fh.seek(0, 2)
        fh.write(b"\0" * 8)
    before = len(scans)
    dm.open_sweep(path)
    assert len(scans) > before


@pytest.mark.parametrize("kw", [dict(gammas=[1e-3, 1e-2, 0.1], betas=[0.0, 0.9], reps=2, steps=5),
                                dict(pairs=[(0.01, 0.5), (0.1, 0.0)], steps=5),
                                dict(lams=[0.01, 0.1], t_max=1.0)])
def test_the_writer_does_not_read_back_a_store_it_has_just_created(tmp_path, monkeypatch, kw):
    # what it would read is known: every point's fill value (reading every chunk back took ~10 % of a short sweep)
    config, problem = make_config(SPEC, kw.get("gammas"), kw.get("betas"), kw.get("lams"), kw.get("steps"),
                                  kw.get("t_max"), kw.get("reps", 1), None, 0, None, 0.01, False, "auto", False,
                                  1e-8, pairs=kw.get("pairs"))
    plan = Plan(config, problem)
    path = str(tmp_path / "s.h5")
    writer = SweepFile(path)
    writer.create(plan)
    reads = []
    orig = SweepFile._read
    monkeypatch.setattr(SweepFile, "_read", lambda self, *a: reads.append(a) or orig(self, *a))
    got = writer.read(plan, repair=True)
    assert reads == []
    memory = writer._memory
    want = SweepFile(path).read(plan, repair=True)  # (another object: read from the file)
    assert len(reads) == 1
    for g, w in zip(got[:3], want[:3], strict=True):
        if isinstance(g, dict):
            assert set(g) == set(w)
            for name in g:
                assert g[name].dtype == w[name].dtype and g[name].tobytes() == w[name].tobytes(), name
        else:
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    assert got[3]["sessions"] == want[3]["sessions"] == 0 and got[3] == want[3]
    assert set(memory) == set(SweepFile(path)._read(plan, True)[0]) | {"done", "session"}


def test_a_sweep_with_a_store_holds_one_copy_of_its_grid(tmp_path):
    # the writer's copy of the grid is the executor's grid, and both go before the final read: about one copy of
    # the result arrays at a time (three before: the writer's, the executor's and the final read's)
    spec = {"n": 20, "d": 200, "s": 5, "n_test": 50}  # (wide: the grid's vectors outweigh a wave and the fixed costs)
    kw = dict(gammas=np.geomspace(1e-3, 3e-2, 30), betas=np.linspace(0.0, 0.9, 50), reps=2, steps=5, wave_size=64,
              progress=False)
    dm.sweep(spec, store=str(tmp_path / "warm.h5"), **dict(kw, gammas=[0.01], betas=[0.5], reps=1))
    tracemalloc.start()
    try:
        sw = dm.sweep(spec, store=str(tmp_path / "s.h5"), **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plain = dm.sweep(spec, **kw)  # (no store: the executor's own grid)
    grid_bytes = sum(a.nbytes for a in sw.data.values())
    assert grid_bytes > 25e6
    assert peak < 2.0 * grid_bytes  # (3.0x with three copies; 1.5x now, the rest a wave and the store's scan)
    for name in FIELDS:  # the same bits with and without a store
        assert sw[name].tobytes() == plain[name].tobytes(), name
    # the store holds them too, read by another reader
    again = dm.open_sweep(str(tmp_path / "s.h5"))
    for name in FIELDS:
        assert again[name].tobytes() == plain[name].tobytes(), name


def _plain_loss(X, y, theta):
    r = X @ theta - y
    loss = float(r @ r / (2 * len(r)))
    return np.inf if np.isnan(loss) else loss


@pytest.mark.parametrize("n, d, n_test", [(1, 1, 0), (5, 2, 3), (20, 30, 100), (257, 33, 1000), (8, 129, 17),
                                          (40, 300, 0)])
def test_wave_losses_and_norms_are_the_bits_of_each_point(n, d, n_test):
    # one stacked product per wave, each point's the bits of its own vector product (as Problem.train_loss,
    # np.linalg.norm and np.abs(theta).sum() of one point), over magnitudes from 1e-200 to 1e300
    from dlnmomentum.problem import Problem
    from dlnmomentum.theory._float64 import norm2_rows

    rng = np.random.default_rng(n * 1000 + d)
    X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    Xt, yt = (rng.normal(size=(n_test, d)), rng.normal(size=n_test)) if n_test else (None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (a wide problem's warning)
        p = Problem(X, y, Xt, yt)
    m = 1500
    T = rng.normal(size=(m, d)) * 10.0 ** rng.integers(-200, 200, size=(m, 1)) * rng.random((m, d)) ** 3
    T[:5] = np.clip(rng.normal(size=(5, d)) * 1e170, -1e300, 1e300)  # (norms that the plain sum overflows)
    train, test, norms, l1 = p._train_losses(T), p._test_losses(T), norm2_rows(T), np.abs(T).sum(axis=-1)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(m):
            th = T[i].copy()
            assert train[i].tobytes() == np.float64(_plain_loss(X, y, th)).tobytes(), i
            want = _plain_loss(Xt, yt, th) if n_test else np.nan
            assert np.array_equal(test[i], want, equal_nan=True) and test[i].tobytes() == np.float64(want).tobytes()
            s = np.abs(th).max()
            plain = np.linalg.norm(th) if 1e-150 <= s <= 1e150 or s == 0 else s * np.linalg.norm(th / s)
            assert norms[i].tobytes() == np.float64(plain).tobytes(), i
            assert l1[i].tobytes() == np.float64(np.abs(th).sum()).tobytes(), i
    D = T[:20].copy()
    D[7, 0], D[8, -1] = np.nan, np.inf
    got = norm2_rows(D)
    assert np.isnan(got[7]) and got[8] == np.inf


def test_sweep_points_are_their_single_runs_without_a_call_per_point(monkeypatch):
    # converged, diverged and max_steps points, with a test set: the wave's fields come from whole-wave operations
    # (no loss or norm per point) and every point is still its single run dm.mgd bit for bit
    from dlnmomentum import problem as problem_module
    from dlnmomentum.runs import points

    problem = dm.sparse_regression(n=20, d=30, s=5, n_test=100, seed=3)
    gammas, betas = [0.004, 0.02, 0.08, 0.3], [0.0, 0.6, 0.9]
    kw = dict(steps=2000, tol=1e-4, gradient="data", seed=11)

    def per_point(*a, **k):
        raise AssertionError("a loss or a norm computed point by point")

    with monkeypatch.context() as mp:
        for name in ("_train_loss", "_test_loss", "train_loss", "test_loss"):
            mp.setattr(problem_module.Problem, name, per_point)
        mp.setattr(points, "norm2", per_point)
        sw = dm.sweep(problem, gammas=gammas, betas=betas, progress=False, **kw)
    statuses = set()
    for ib, beta in enumerate(betas):
        for ig, gamma in enumerate(gammas):
            res = dm.mgd(problem, gamma, beta, **kw)
            statuses.add(res.status_name)
            with np.errstate(over="ignore"):
                delta = np.asarray(res.delta_inf)
                s = np.abs(delta).max()
                norm = np.linalg.norm(delta) if s <= 1e150 else s * np.linalg.norm(delta / s)
            want = {"train_loss": res.train_loss, "test_loss": res.test_loss, "l1_norm": res.l1_norm,
                    "delta_inf_norm": norm, "status": res.status, "steps_done": res.steps_done,
                    "crossed": int(res.crossed), "theta": res.theta, "s_plus": res.s_plus, "s_minus": res.s_minus,
                    "delta_inf": res.delta_inf, "theta0_tilde": res.theta0_tilde}
            for name, value in want.items():
                got = sw[name][0, ib, ig]
                assert np.asarray(got, dtype=np.float64).tobytes() == np.asarray(value, dtype=np.float64).tobytes(), \
                    (name, gamma, beta, res.status_name)
    assert {"converged", "diverged", "max_steps"} <= statuses


@pytest.mark.parametrize("layout", ["new", "line"])
def test_a_long_line_is_written_chunk_by_chunk_and_both_layouts_resume(tmp_path, monkeypatch, layout):
    # a store of pairs (one line of points) is cut into chunks of at most CHUNK_BYTES along the line, so a wave
    # rewrites the chunks it touches, not the whole line; a store chunked one line per chunk (before) is read,
    # resumed and written as it is
    import h5py
    import xarray as xr

    from dlnmomentum.store import sweep_format as SF

    monkeypatch.setattr(SF, "CHUNK_BYTES", 4096)  # (17 points of theta per chunk, d = 30)
    if layout == "line":  # a store as created before: one chunk per line
        orig = SF.grid_chunks
        monkeypatch.setattr(SF, "grid_chunks", lambda shape, grid_ndim, itemsize=None: orig(shape, grid_ndim))
    npairs = 600
    pairs = list(zip(np.geomspace(1e-3, 3e-2, npairs), np.linspace(0.0, 0.9, npairs), strict=True))
    kw = dict(pairs=pairs, steps=20, wave_size=64, progress=False)
    path = str(tmp_path / "p.h5")
    selected = []  # points of `theta` each wave writes
    orig_touched = SF._touched_chunks

    def touched(shape, chunks, idx):
        sels = list(orig_touched(shape, chunks, idx))
        if len(shape) == 3 and shape[-1] == SPEC["d"]:
            selected.append((len(idx[-1]), sum(s[1].stop - s[1].start for s in sels)))
        return iter(sels)

    monkeypatch.setattr(SF, "_touched_chunks", touched)
    sw = dm.sweep(SPEC, store=path, **kw)
    want = dm.sweep(SPEC, **{k: v for k, v in kw.items() if k != "wave_size"})  # (no store, one wave)
    with h5py.File(path, "r") as f:
        chunks = f["theta"].chunks
    if layout == "new":
        assert chunks == (1, 17, SPEC["d"])
        # each wave writes its own points and at most a chunk more at each end, not the 600 points of the line
        assert len(selected) >= 9 and all(sel <= n + 2 * 17 for n, sel in selected), selected
    else:
        assert chunks == (1, npairs, SPEC["d"])
        assert all(sel == npairs for _, sel in selected)
    for name in FIELDS:
        assert sw[name].tobytes() == want[name].tobytes(), name
    # an interrupted store: points 100..299 not done, their fields scribbled over; a resume writes them again
    with h5py.File(path, "r+") as f:
        f["done"][0, 100:300] = 0
        f["theta"][0, 100:300] = np.nan
        f["train_loss"][0, 100:300] = -1.0
    monkeypatch.undo()  # (resumed by this version, whatever the layout)
    partial = dm.open_sweep(path)
    assert int(partial.done.sum()) == npairs - 200
    resumed = dm.resume_sweep(path, wave_size=64, progress=False)
    assert resumed.complete
    for name in FIELDS:
        assert resumed[name].tobytes() == want[name].tobytes(), name
    with h5py.File(path, "r") as f:
        assert f["theta"].chunks == chunks  # (a store keeps its layout)
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        assert ds["theta"].shape == (1, npairs, SPEC["d"])
        assert ds["theta"].values.tobytes() == want["theta"].tobytes()
        assert np.array_equal(ds["done"].values, np.ones((1, npairs), dtype=np.uint8))


def test_plain_pairs_are_checked_in_one_pass_as_one_by_one(monkeypatch):
    # 10⁵ (γ, β) pairs took about a second to check, one as_float per value; plain numbers are now checked in one
    # pass, converted as as_float converts them, and anything else still one by one (the first bad entry named)
    from dlnmomentum.sweeps import plan as P

    rng = np.random.default_rng(3)
    mixed = [(float(g), b) for g, b in zip(rng.uniform(1e-3, 0.1, 500), rng.uniform(0.0, 0.99, 500), strict=True)]
    mixed += [(1, 0), (np.float32(0.3), np.int64(0)), (np.float64(0.2), 0.5)]
    expect = (np.array([P.as_float("g", g) for g, _ in mixed]), np.array([P.as_float("b", b) for _, b in mixed]))
    monkeypatch.setattr(P, "as_float", lambda *a, **k: pytest.fail("a plain pair was checked value by value"))
    gammas, betas = P._as_pairs(mixed)
    assert gammas.tobytes() == expect[0].tobytes() and betas.tobytes() == expect[1].tobytes()
    monkeypatch.undo()
    for bad, match in (([(0.1, 0.2), (0.1, True)], r"pairs\[1\] beta must be a real number"),
                       ([(0.1, 0.2), (0.0, 0.5)], r"pairs\[1\] gamma must be in \(0, inf\)"),
                       ([(0.1, 1.0)], r"pairs\[0\] beta must be in \[0, 1\)"),
                       ([(float("nan"), 0.5)], r"pairs\[0\] gamma must be finite"),
                       ([(10**400, 0.5)], r"pairs\[0\] gamma must be finite")):
        with pytest.raises((TypeError, ValueError), match=match):
            P._as_pairs(bad)
