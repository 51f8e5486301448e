"""MGD/SMGD on networks (issue 12): the teacher-student ReLU net and the deep linear net.

Checked against independent references written here: central finite differences for the
gradients, a plain NumPy heavy-ball loop (and ``torch.optim.SGD`` when torch is installed)
for the iterates; plus the ReLU kink convention, bitwise chunking/recording invariance,
divergence reported as a status, and bitwise resume of a stored run.
"""

import dataclasses
import os
import signal

import numpy as np
import pytest
from signal_helpers import sigint_default

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.driver import drive
from dlnmomentum.kernels import networks as KN
from dlnmomentum.runs.network import prepare_network
from dlnmomentum.store import writer as store_writer


@pytest.fixture(scope="module")
def ts():
    return dm.teacher_student(n_test=200, seed=3)


@pytest.fixture(scope="module")
def dl():
    return dm.deep_linear(widths=(30, 20, 40, 20, 1), n_test=200, seed=1)


@pytest.fixture(scope="module")
def dl_paper():
    return dm.deep_linear(n_test=100, seed=0)


def kernel_grad(problem, w, X=None, y=None, product=True):
    """The kernels' loss and gradient (``product=False``: backpropagation even for linear nets)."""
    widths, w_off, b_off = problem.layout
    g = np.zeros(problem.n_params)
    loss = KN._net_loss_grad(np.ascontiguousarray(w), widths, w_off, b_off, problem.relu,
                             problem.X if X is None else X, problem.y if y is None else y, g, product)
    return loss, g


# -- independent NumPy reference -----------------------------------------------------------------------

def np_loss_grad(problem, w, X, y):
    """Loss and gradient by plain NumPy backpropagation on the unflattened layers."""
    layers = problem.unflatten(w)
    acts = [X]
    for k, (W, b) in enumerate(layers):
        z = acts[-1] @ W + (0.0 if b is None else b)
        acts.append(np.maximum(z, 0.0) if (problem.relu and k < len(layers) - 1) else z)
    r = acts[-1][:, 0] - y
    n = X.shape[0]
    grads = []
    delta = (r / n)[:, None]
    for k in range(len(layers) - 1, -1, -1):
        W, b = layers[k]
        gW = acts[k].T @ delta
        gb = None if b is None else delta.sum(axis=0)
        grads.append((gW, gb))
        if k:
            delta = delta @ W.T
            if problem.relu:
                delta = delta * (acts[k] > 0)
    flat = []
    for gW, gb in reversed(grads):
        flat.append(gW.ravel())
        if gb is not None:
            flat.append(gb)
    return r @ r / (2 * n), np.concatenate(flat)


def np_heavy_ball(problem, gamma, beta, steps, batches=None):
    w = problem.params0.copy()
    w_prev = w.copy()
    for k in range(steps):
        rows = slice(None) if batches is None else batches[k]
        _, g = np_loss_grad(problem, w, problem.X[rows], problem.y[rows])
        w, w_prev = w - gamma * g + beta * (w - w_prev), w
    return w


def rel_err(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


# -- problems ------------------------------------------------------------------------------------------

def test_problems_and_validation():
    p = dm.teacher_student(seed=0)
    assert p.widths == (2, 20, 1) and p.biases == (True, False) and p.n_params == 2 * 20 + 20 + 20
    assert p.n == 15 and p.d == 2 and p.teacher_widths == (2, 5, 1)
    # targets are the teacher's outputs; everything fixed by the seed
    assert np.array_equal(dm.teacher_student(seed=0).params0, p.params0)
    assert not np.array_equal(dm.teacher_student(seed=1).params0, p.params0)
    q = dm.deep_linear()
    assert q.widths == (30, 60, 120, 60, 1) and q.n_params == 30 * 60 + 60 * 120 + 120 * 60 + 60
    assert abs(q.params0.std() - 0.1) < 0.005
    data = dm.sparse_regression(n=20, d=30, s=5, n_test=1000, seed=0)
    assert np.array_equal(q.X, data.X) and np.array_equal(q.y, data.y)
    with pytest.raises(ValueError, match=r"widths\[0\].*d = 30"):
        dm.deep_linear(widths=(20, 5, 1))
    with pytest.raises(ValueError, match=r"widths\[-1\]"):
        dm.deep_linear(widths=(30, 5, 2))
    with pytest.raises(ValueError, match="student_width"):
        dm.teacher_student(student_width=0)
    with pytest.raises(ValueError, match="beta"):
        dm.mgd(p, 0.1, 1.0, steps=10)
    with pytest.raises(ValueError, match="w0"):
        dm.mgd(p, 0.1, 0.5, steps=10, u0=np.ones(2))


def test_teacher_student_targets_are_the_teacher_outputs():
    p = dm.teacher_student(n_test=50, seed=2)
    W0 = p.teacher[:10].reshape(2, 5)
    b0 = p.teacher[10:15]
    W1 = p.teacher[15:20]
    assert np.allclose(np.maximum(p.X @ W0 + b0, 0) @ W1, p.y, rtol=1e-14, atol=1e-14)
    assert np.allclose(np.maximum(p.X_test @ W0 + b0, 0) @ W1, p.y_test, rtol=1e-14, atol=1e-14)


# -- gradients -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, product", [("ts", True), ("dl", True), ("dl", False)])
def test_gradient_against_central_differences(name, product, request):
    p = request.getfixturevalue(name)
    rng = np.random.default_rng(0)
    w = p.params0 + 0.1 * rng.standard_normal(p.n_params)
    loss, g = kernel_grad(p, w, product=product)
    assert loss == pytest.approx(np.sum((p.output(w) - p.y) ** 2) / (2 * p.n), rel=1e-13)
    h = 1e-6
    idx = rng.choice(p.n_params, size=min(p.n_params, 60), replace=False)
    fd = np.empty(len(idx))
    for k, i in enumerate(idx):
        e = np.zeros(p.n_params)
        e[i] = h
        fd[k] = (p.train_loss(w + e) - p.train_loss(w - e)) / (2 * h)
    assert np.allclose(g[idx], fd, rtol=1e-5, atol=1e-8 * np.abs(g).max())
    _, g_np = np_loss_grad(p, w, p.X, p.y)
    assert rel_err(g, g_np) < 1e-13


def linear_net(widths, biases=None, n=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, widths[0]))
    y = rng.standard_normal(n)
    biases = (False,) * (len(widths) - 1) if biases is None else biases
    n_params = sum(a * b + (b if bias else 0) for a, b, bias in zip(widths[:-1], widths[1:], biases, strict=True))
    return dm.NetworkProblem(X, y, None, None, widths, biases, "linear",
                             rng.standard_normal(n_params) / np.sqrt(max(widths)))


@pytest.mark.parametrize("widths", [(30, 60, 120, 60, 1), (3, 1), (5, 2, 1), (9, 17, 8, 1), (16, 1, 33, 1)])
def test_product_form_equals_backpropagation(widths):
    """Linear nets without biases use the end-to-end product form; it is the same gradient as backpropagation."""
    p = linear_net(widths)
    assert KN.is_product_net(p.relu, p.layout[2], p.layout[0])  # (what the kernels decide)
    loss_bp, g_bp = kernel_grad(p, p.params0, product=False)
    loss, g = kernel_grad(p, p.params0)
    loss_np, g_np = np_loss_grad(p, p.params0, p.X, p.y)
    assert abs(loss - loss_np) <= 1e-14 * loss_np and abs(loss_bp - loss_np) <= 1e-14 * loss_np
    assert rel_err(g, g_bp) < 1e-13 and rel_err(g, g_np) < 1e-13
    assert p.train_loss(p.params0) == pytest.approx(loss_np, rel=1e-14)


def test_linear_nets_with_biases_backpropagate():
    p = linear_net((6, 10, 1), biases=(True, False))
    assert not KN.is_product_net(p.relu, p.layout[2], p.layout[0])
    loss, g = kernel_grad(p, p.params0)
    loss_np, g_np = np_loss_grad(p, p.params0, p.X, p.y)
    assert loss == pytest.approx(loss_np, rel=1e-14) and rel_err(g, g_np) < 1e-13


def exact_fma(a, b, c):
    """a·b + c rounded once (exact rational arithmetic, then Python's correctly rounded conversion)."""
    from fractions import Fraction

    return float(Fraction(a) * Fraction(b) + Fraction(c))


@pytest.mark.parametrize("cols", [1, 7, 8, 13, 60, 120])
def test_rows_dot_follows_its_documented_order(cols):
    """Eight partial sums s_k over the columns i = k (mod 8), fused multiply-adds in increasing i, then
    ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)): bit for bit, from an exact reference."""
    from dlnmomentum.kernels.linear_networks import _rows_dot

    rng = np.random.default_rng(cols)
    W = rng.standard_normal((6, cols)) * 10.0 ** rng.integers(-8, 8, size=(6, cols))
    x = rng.standard_normal(cols)
    out = np.zeros(6)
    _rows_dot(W, x, out, np.zeros((6, 8)))
    for j in range(6):
        s = [0.0] * 8
        for i in range(cols):
            s[i % 8] = exact_fma(W[j, i], x[i], s[i % 8])
        assert out[j] == ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))


def test_relu_kink_convention():
    """relu'(0) = 0: a pre-activation exactly 0 passes no gradient (and relu(0) = 0)."""
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.array([1.0, -1.0])
    # W_0 (2, 2), b_0 (2), W_1 (2, 1): unit 0 has z = x0 - 1 = 0 on sample 0 and -1 on sample 1
    W0 = np.array([[1.0, 2.0], [0.0, 3.0]])
    b0 = np.array([-1.0, 0.5])
    W1 = np.array([1.5, -0.5])
    w = np.concatenate([W0.ravel(), b0, W1])
    p = dm.NetworkProblem(X, y, None, None, (2, 2, 1), (True, False), "relu", w)
    _, g = kernel_grad(p, w)
    # unit 0 is exactly on the kink on sample 0 and off on sample 1: no gradient reaches W_0[:, 0], b_0[0], W_1[0]
    assert g[0] == 0.0 and g[2] == 0.0 and g[4] == 0.0 and g[6] == 0.0
    assert g[1] != 0.0 and g[5] != 0.0 and g[7] != 0.0
    # the convention relu'(0) = 1 would give a non-zero gradient there: the test can tell them apart
    r = (np.maximum(X @ W0 + b0, 0) @ W1 - y) / 2
    assert r[0] * W1[0] != 0.0
    _, g_np = np_loss_grad(p, w, X, y)
    assert np.array_equal(g, g_np)


# -- iterates against references -----------------------------------------------------------------------

@pytest.mark.parametrize("name, gamma, beta, steps", [("ts", 0.05, 0.9, 400), ("dl", 0.02, 0.8, 200),
                                                      ("dl_paper", 0.005, 0.8, 300)])
def test_mgd_matches_numpy_reference(name, gamma, beta, steps, request):
    p = request.getfixturevalue(name)
    res = dm.mgd(p, gamma, beta, steps=steps)
    assert res.status == dm.Status.MAX_STEPS and res.steps_done == steps
    ref = np_heavy_ball(p, gamma, beta, steps)
    assert rel_err(res.params, ref) < 1e-12
    assert res.train_loss < 0.5 * p.train_loss(p.params0)  # it trains
    assert res.lam == pytest.approx(gamma / (1 - beta) ** 2)


@pytest.mark.parametrize("name, gamma, steps, B", [("ts", 0.05, 300, 4), ("dl", 0.01, 200, 6)])
@pytest.mark.parametrize("replace", [False, True])
def test_smgd_matches_numpy_reference_with_the_same_batches(name, gamma, steps, B, replace, request):
    p = request.getfixturevalue(name)
    res = dm.mgd(p, gamma, 0.8, steps=steps, batch_size=B, seed=5, replace=replace)
    batches = dm.batch_indices(p.n, B, steps, seed=5, replace=replace)
    assert rel_err(res.params, np_heavy_ball(p, gamma, 0.8, steps, batches)) < 1e-12
    assert not np.array_equal(res.params, dm.mgd(p, gamma, 0.8, steps=steps, batch_size=B, seed=6,
                                                 replace=replace).params)
    # with a convergence test the full train loss is checked first (no draw) and the same batches follow
    assert np.array_equal(res.params, dm.mgd(p, gamma, 0.8, steps=steps, batch_size=B, seed=5, replace=replace,
                                             tol=1e-30).params)


def test_deep_linear_matches_torch_sgd(dl_paper):
    torch = pytest.importorskip("torch")
    gamma, beta, steps = 0.005, 0.8, 200
    res = dm.mgd(dl_paper, gamma, beta, steps=steps)
    layers = [torch.tensor(W.copy(), requires_grad=True) for W, _ in dl_paper.unflatten(dl_paper.params0)]
    X = torch.tensor(dl_paper.X)
    y = torch.tensor(dl_paper.y)
    opt = torch.optim.SGD(layers, lr=gamma, momentum=beta, dampening=0)
    for _ in range(steps):
        opt.zero_grad()
        out = X
        for W in layers:
            out = out @ W
        loss = ((out[:, 0] - y) ** 2).sum() / (2 * dl_paper.n)
        loss.backward()
        opt.step()
    ref = np.concatenate([W.detach().numpy().ravel() for W in layers])
    assert rel_err(res.params, ref) < 1e-12


def test_mgd_matches_torch_sgd(ts):
    torch = pytest.importorskip("torch")
    gamma, beta, steps = 0.05, 0.9, 300
    res = dm.mgd(ts, gamma, beta, steps=steps)
    w = torch.tensor(ts.params0.copy(), dtype=torch.float64, requires_grad=True)
    X = torch.tensor(ts.X)
    y = torch.tensor(ts.y)
    opt = torch.optim.SGD([w], lr=gamma, momentum=beta, dampening=0)
    for _ in range(steps):
        opt.zero_grad()
        W0 = w[:40].reshape(2, 20)
        b0 = w[40:60]
        W1 = w[60:80]
        loss = ((torch.relu(X @ W0 + b0) @ W1 - y) ** 2).sum() / (2 * ts.n)
        loss.backward()
        opt.step()
    assert rel_err(res.params, w.detach().numpy()) < 1e-12


# -- bitwise invariances, statuses, stores -------------------------------------------------------------

def same_result(a, b):
    for f in dataclasses.fields(a):
        if f.name in ("problem", "trajectory"):
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), f.name
        elif isinstance(x, float):
            assert np.float64(x).tobytes() == np.float64(y).tobytes(), f.name
        else:
            assert x == y, f.name
    if a.trajectory is not None:
        fa, fb = a.trajectory.fields(), b.trajectory.fields()
        assert fa.keys() == fb.keys()
        for k in fa:
            assert np.asarray(fa[k]).tobytes() == np.asarray(fb[k]).tobytes(), k


@pytest.mark.parametrize("batch_size", [None, 5])
def test_chunking_and_recording_change_no_bit(ts, batch_size):
    kwargs = dict(steps=3000, batch_size=batch_size, seed=2, tol=1e-9)
    plain = dm.mgd(ts, 0.05, 0.9, **kwargs)
    recorded = dm.mgd(ts, 0.05, 0.9, record=dm.Record(every=7), record_params=True, **kwargs)
    for field in ("params", "train_loss", "test_loss", "steps_done", "status"):
        assert np.asarray(getattr(plain, field)).tobytes() == np.asarray(getattr(recorded, field)).tobytes()
    run = prepare_network(ts, 0.05, 0.9, record=dm.Record(every=7), record_params=True, **kwargs)
    run.chunk_steps = 13
    status, blocks = drive(run)
    same_result(recorded, run.finish(status, blocks))
    traj = recorded.trajectory
    assert traj.step[0] == 0 and np.all(np.diff(traj.step[:-1]) == 7) and traj.step[-1] <= recorded.steps_done
    # each recorded row is the state after `step` updates
    k = int(traj.step[3])
    assert np.array_equal(traj.extra["params"][3], dm.mgd(ts, 0.05, 0.9, **dict(kwargs, steps=k)).params)
    assert traj.train_loss[3] == ts.train_loss(traj.extra["params"][3])
    assert traj.test_loss[3] == ts.test_loss(traj.extra["params"][3])


@pytest.mark.parametrize("batch_size", [None, 4])
def test_deep_linear_divergence_is_a_status(dl, batch_size):
    kwargs = dict(batch_size=batch_size, seed=1)
    div = dm.mgd(dl, 5.0, 0.9, steps=5_000, **kwargs)
    assert div.status == dm.Status.DIVERGED and np.all(np.isfinite(div.params)) and div.steps_done < 5_000
    assert np.array_equal(div.params, dm.mgd(dl, 5.0, 0.9, steps=div.steps_done, **kwargs).params)


def test_convergence_and_divergence_are_statuses(ts):
    conv = dm.mgd(ts, 0.05, 0.9, steps=200_000, tol=1e-3)
    assert conv.status == dm.Status.CONVERGED and conv.train_loss <= 1e-3
    assert dm.mgd(ts, 0.05, 0.9, steps=conv.steps_done - 1).train_loss > 1e-3  # the first such iterate
    div = dm.mgd(ts, 50.0, 0.9, steps=10_000)
    assert div.status == dm.Status.DIVERGED and div.status_name == "diverged"
    assert np.all(np.isfinite(div.params)) and div.steps_done < 10_000
    # the update that diverged was not committed: the state is the iterate after steps_done updates
    assert np.array_equal(div.params, dm.mgd(ts, 50.0, 0.9, steps=div.steps_done).params)


@pytest.mark.parametrize("batch_size", [None, 5])
def test_stored_run_resumes_bit_for_bit(dl, tmp_path, monkeypatch, batch_size):
    kwargs = dict(steps=400, record=dm.Record(every=10), record_params=True, batch_size=batch_size, seed=4)
    live = dm.mgd(dl, 0.02, 0.8, **kwargs)
    run = prepare_network(dl, 0.02, 0.8, **kwargs)
    run.chunk_steps = 25
    calls = []

    def hook(point):  # Ctrl-C after a few chunks
        calls.append(point)
        if point == "chunk" and calls.count("chunk") == 5:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(store_writer, "_TEST_HOOK", hook)
    path = tmp_path / "net.h5"
    with sigint_default():  # (the suite may run with SIGINT ignored)
        first = S.run_with_store(run, path, checkpoint_every=0.0)
    monkeypatch.setattr(store_writer, "_TEST_HOOK", None)
    assert first.status_name == "interrupted" and 0 < first.steps_done < 400
    resumed = dm.resume(path)
    same_result(live, resumed)
    s = dm.open_store(path)
    assert s.family == "network" and s.state == "complete"
    same_result(live, s.result)
    problem = s.problem
    assert isinstance(problem, dm.NetworkProblem) and problem.widths == dl.widths
    for name in ("X", "y", "X_test", "y_test", "params0"):
        assert getattr(problem, name).tobytes() == getattr(dl, name).tobytes()
    assert np.array_equal(s["params"].value, live.trajectory.extra["params"])


# -- sweeps --------------------------------------------------------------------------------------------

def test_sweep_points_equal_single_runs(ts):
    sw = dm.networks_sweep(ts, gammas=[0.02, 0.05], betas=[0.0, 0.8], steps=3000, tol=1e-4, threads=2)
    via_sweep = dm.sweep(ts, gammas=[0.02, 0.05], betas=[0.0, 0.8], steps=3000, tol=1e-4)
    for name in sw.fields:
        assert np.asarray(sw[name]).tobytes() == np.asarray(via_sweep[name]).tobytes(), name
    with pytest.raises(ValueError, match="network sweep"):
        dm.sweep(ts, lams=[0.1], t_max=1.0)
    assert sw.dims == ("rep", "beta", "gamma") and sw.complete
    for ib, beta in enumerate(sw.coords["beta"]):
        for ig, gamma in enumerate(sw.coords["gamma"]):
            r = dm.mgd(ts, gamma, beta, steps=3000, tol=1e-4)
            for name in ("test_loss", "train_loss", "param_norm", "lam"):
                assert np.float64(sw[name][0, ib, ig]).tobytes() == np.float64(getattr(r, name)).tobytes(), name
            assert sw.status[0, ib, ig] == r.status and sw.steps_done[0, ib, ig] == r.steps_done
    assert "network-mgd" in sw.summary()


def test_sweep_store_interrupted_then_resumed(tmp_path):
    spec = {"generator": "deep_linear", "widths": (30, 10, 1), "n_test": 50}
    kwargs = dict(gammas=[0.01, 0.03], betas=[0.0, 0.5, 0.9], steps=200, reps=2, batch_size=5)
    full = dm.networks_sweep(spec, **kwargs, threads=1)
    path = tmp_path / "sweep.h5"

    def log(line):  # Ctrl-C after the first wave
        if line.startswith("wrote 2/"):
            os.kill(os.getpid(), signal.SIGINT)

    with sigint_default():
        first = dm.networks_sweep(spec, **kwargs, store=path, wave_size=2, threads=2, log=log)
    assert first.interrupted and first.done.sum() == 2
    with pytest.raises(dm.StoreError, match="exists"):
        dm.networks_sweep(spec, **kwargs, store=path)
    with pytest.raises(dm.StoreError, match="differs in steps"):
        dm.networks_sweep(spec, **dict(kwargs, steps=201), store=path, resume=True)
    done = dm.networks_sweep(spec, **kwargs, store=path, resume=True)
    assert done.complete and not done.interrupted
    assert dm.resume_sweep(path).complete  # dm.resume_sweep knows network sweep stores
    for name in full.fields:
        assert np.asarray(full[name]).tobytes() == np.asarray(done[name]).tobytes(), name
    reopened = dm.open_networks_sweep(path)
    assert reopened.config["sessions"] == 2  # created+interrupted, resumed (resumed again: complete, not written)
    # rep 1 of a spec sweep is the generator with seed + 1, batches with seed + 1
    r = dm.mgd(dm.deep_linear(widths=(30, 10, 1), n_test=50, seed=1), 0.03, 0.9, steps=200, batch_size=5, seed=1)
    assert reopened.test_loss[1, 2, 1] == r.test_loss


def test_sweep_store_keeps_a_given_problem(ts, tmp_path):
    path = tmp_path / "given.h5"
    dm.networks_sweep(ts, gammas=[0.05], betas=[0.5], steps=10, store=path)
    sw = dm.resume_networks_sweep(path)
    assert sw.complete and sw.config["spec"] is None
    from dlnmomentum.store import network_sweep as NS

    _, problem, _, _ = NS.read(str(path))
    assert problem.params0.tobytes() == ts.params0.tobytes() and problem.widths == ts.widths


# -- figures and the lambda measure --------------------------------------------------------------------

def test_lambda_spread_tells_lambda_from_gamma():
    from dlnmomentum.figures.networks import lambda_spread

    gammas, betas = np.geomspace(1e-3, 1e-1, 15), np.linspace(0.0, 0.9, 15)
    lam = gammas[None, None, :] / (1 - betas[None, :, None]) ** 2
    coords = {"rep": np.arange(1), "beta": betas, "gamma": gammas}
    done = np.ones(lam.shape, dtype=bool)

    def sweep_of(values):
        return dm.Sweep(("rep", "beta", "gamma"), coords, {"lam": lam, "test_loss": values}, done, {})

    by_lam = lambda_spread(sweep_of(lam ** 0.5), bins=30)
    by_gamma = lambda_spread(sweep_of(np.broadcast_to(gammas, lam.shape) ** 0.5), bins=30)
    assert by_lam["r2"] > 0.99 and by_lam["ratio"] < 0.1
    assert by_gamma["ratio"] > 3 * by_lam["ratio"] and by_gamma["r2"] < by_lam["r2"]


def test_explained_shares_name_the_combination_that_governs():
    """A field that depends on ε = γ/(1-β) only is explained by ε, and only partly by λ (the control)."""
    from dlnmomentum.figures.networks import SPREAD_KEYS, explained_shares, lambda_spread

    gammas, betas = np.geomspace(1e-3, 1e-1, 15), np.linspace(0.0, 0.9, 15)
    G, B = np.meshgrid(gammas, betas)
    coords = {"rep": np.arange(1), "beta": betas, "gamma": gammas}
    data = {"lam": (G / (1 - B) ** 2)[None], "gamma": G[None], "beta": B[None]}

    def shares(values):
        sw = dm.Sweep(("rep", "beta", "gamma"), coords, dict(data, train_loss=values[None]),
                      np.ones((1, 15, 15), dtype=bool), {})
        return explained_shares(sw, "train_loss")

    by_eps = shares((G / (1 - B)) ** -2)  # a loss that falls with the flow time ε of a step
    assert set(by_eps) == set(SPREAD_KEYS)
    assert by_eps["eps"] > 0.98 and by_eps["lam"] < by_eps["eps"] - 0.05 and by_eps["gamma"] < 0.9
    by_lam = shares(np.sqrt(G / (1 - B) ** 2))
    assert by_lam["lam"] > 0.98 and by_lam["eps"] < by_lam["lam"] - 0.05
    # a sweep fresh from the engine has no gamma/beta fields: the coordinates are used
    del data["gamma"], data["beta"]
    assert shares(np.sqrt(G / (1 - B) ** 2)) == by_lam
    with pytest.raises(ValueError, match="by must be one of"):
        lambda_spread(dm.Sweep(("rep", "beta", "gamma"), coords, dict(data, train_loss=G[None]),
                               np.ones((1, 15, 15), dtype=bool), {}), "train_loss", by="theta")
