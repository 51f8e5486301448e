"""Network runs: chunking by the gradient the kernel takes (no bit changes), inputs refused by name (replace without a
batch, alpha, NetworkProblem's fields, the flat vectors of its methods, resume with overwrite), and the stored
``params`` observable's ``parameter`` dimension."""

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.driver import drive
from dlnmomentum.kernels import networks as KN
from dlnmomentum.kernels.linear_networks import work_size
from dlnmomentum.runs.network import prepare_network


@pytest.fixture(scope="module")
def ts():
    return dm.teacher_student(n_test=50, seed=3)


@pytest.fixture(scope="module")
def dl():
    # a product-form net (linear, no bias) with a 1000-row test set, as the paper's default
    return dm.deep_linear(widths=(30, 20, 40, 20, 1), n_test=1000, seed=1)


# -- 1. chunks sized by the product form; no bit depends on them ------------------------------------------------

@pytest.mark.filterwarnings("ignore:d = 30 <= n = 200")
def test_chunk_length_of_a_product_net_does_not_grow_with_the_samples():
    """The product form costs ~10 operations per parameter whatever n: its chunks were sized by backpropagation's
    ~6n per parameter (24 steps for the paper's net on n = 20, 16 on n = 200) and Python's work per chunk was 3-5x the
    kernel's. A backpropagating net's chunks do shrink with n."""
    small, large = dm.deep_linear(n=20, n_test=0), dm.deep_linear(n=200, n_test=0)
    c_small = prepare_network(small, 0.005, 0.8, steps=10**6).chunk_steps
    c_large = prepare_network(large, 0.005, 0.8, steps=10**6).chunk_steps
    assert c_small == c_large
    # ~5e7 operations per chunk (driver.chunk_steps_for) at 10 per parameter of 16 260
    assert 5e7 / (10 * small.n_params) - 1 <= c_small <= 5e7 / (10 * small.n_params)
    t_small = prepare_network(dm.teacher_student(n=15, n_test=0), 0.1, 0.5, steps=10**6).chunk_steps
    t_large = prepare_network(dm.teacher_student(n=150, n_test=0), 0.1, 0.5, steps=10**6).chunk_steps
    assert t_large < t_small


def test_product_net_workspace_holds_no_backpropagation_or_test_rows(dl):
    widths, _, b_off = dl.layout
    off, acts, deltas, wt, grad, Xb, yb, batch, new = KN._net_workspace(widths, b_off, False, dl.n, dl.d,
                                                                         dl.n_params, 0)
    assert acts.size == dl.n + work_size(widths)  # residuals and the product form's scratch only
    assert deltas.size == wt.size == grad.size == yb.size == 1 and new.size == dl.n_params


def _chunked(problem, chunk, **kwargs):
    run = prepare_network(problem, 0.01, 0.8, record=dm.Record(every=5), record_params=True, **kwargs)
    if chunk is not None:
        run.chunk_steps = chunk
    status, blocks = drive(run)
    return run.finish(status, blocks)


@pytest.mark.parametrize("name, batch_size", [("dl", None), ("dl", 5), ("ts", None), ("ts", 4)])
def test_chunk_length_changes_no_bit(name, batch_size, request):
    problem = request.getfixturevalue(name)
    kwargs = dict(steps=203, batch_size=batch_size, seed=4)
    reference = _chunked(problem, 203, **kwargs)  # one chunk
    for chunk in (1, 7, None):  # None: the run's own chunk length
        got = _chunked(problem, chunk, **kwargs)
        assert got.params.tobytes() == reference.params.tobytes()
        a, b = got.trajectory, reference.trajectory
        assert a.step.tobytes() == b.step.tobytes()
        assert a.train_loss.tobytes() == b.train_loss.tobytes()
        assert a.test_loss.tobytes() == b.test_loss.tobytes()
        assert a.extra["params"].tobytes() == b.extra["params"].tobytes()
    # the recorded test losses are the loss of the recorded parameters on the test set (plain NumPy)
    k = 7
    p = reference.trajectory.extra["params"][k]
    r = problem.output(p, problem.X_test) - problem.y_test
    assert reference.trajectory.test_loss[k] == pytest.approx(r @ r / (2 * problem.n_test), rel=1e-12)


# -- 2. replace=True without a batch ------------------------------------------------------------------------------

REPLACE = r"replace=True draws SMGD batches with replacement: it needs a batch_size"


def test_replace_without_a_batch_is_refused(ts, capsys):
    with pytest.raises(ValueError, match=REPLACE):
        dm.mgd(ts, 0.1, 0.5, steps=10, replace=True)
    with pytest.raises(ValueError, match=REPLACE):
        dm.networks_sweep(ts, gammas=[0.1], betas=[0.5], steps=5, replace=True)
    with pytest.raises(ValueError, match=REPLACE):
        dm.sweep({"generator": "teacher_student"}, gammas=[0.1], betas=[0.5], steps=5, replace=True)
    assert main(["network", "teacher-student", "--gamma", ".1", "--beta", ".5", "--steps", "5", "--replace"]) == 2
    assert "--replace draws SMGD batches with replacement: it needs a --batch-size" in capsys.readouterr().err
    # with a batch it is SMGD with replacement (also with batch_size = n, which stays SMGD)
    assert dm.mgd(ts, 0.1, 0.5, steps=5, batch_size=ts.n, replace=True).kind == "network-smgd"


# -- 3. alpha -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", ["x", -1, 0.01, 0.5])
def test_alpha_is_refused_for_a_network(ts, alpha):
    with pytest.raises(ValueError, match="alpha, u0, v0 and gradient are for diagonal networks"):
        dm.mgd(ts, 0.1, 0.5, steps=10, alpha=alpha)
    with pytest.raises(ValueError, match="a network sweep takes gammas, betas and steps"):
        dm.sweep(ts, gammas=[0.1], betas=[0.5], steps=5, alpha=alpha)


@pytest.mark.parametrize("theory_tol", [5, 1e-8])
def test_theory_tol_is_refused_for_a_network_sweep(ts, theory_tol):
    """(A network sweep computes no theory fields: theory_tol was ignored, even 5.)"""
    with pytest.raises(ValueError, match="theory_tol"):
        dm.sweep(ts, gammas=[0.1], betas=[0.5], steps=5, theory_tol=theory_tol)


def test_a_diagonal_sweep_keeps_its_theory_tol_default():
    P = dm.sparse_regression(n=5, d=8, seed=0)
    a = dm.sweep(P, gammas=[0.01], betas=[0.5], steps=20, theory=True)
    b = dm.sweep(P, gammas=[0.01], betas=[0.5], steps=20, theory=True, theory_tol=1e-8)
    assert a.config["theory_tol"] == b.config["theory_tol"] == 1e-8


def test_diagonal_alpha_default_is_unchanged():
    P = dm.sparse_regression(n=5, d=8, seed=0)
    a, b = dm.mgd(P, 0.01, 0.5, steps=50), dm.mgd(P, 0.01, 0.5, steps=50, alpha=0.01)
    assert a.theta.tobytes() == b.theta.tobytes()
    np.testing.assert_array_equal(a.config.gamma, 0.01)
    # u0 = alpha * 1: the default run starts at 0.01 (the first recorded row)
    rec = dm.mgd(P, 0.01, 0.5, steps=1, record=dm.Record(every=1))
    assert np.all(rec.trajectory.w_plus[0] == 0.01)
    with pytest.raises(ValueError, match="give alpha"):
        dm.mgd(P, 0.01, 0.5, steps=10, alpha=0.5, u0=np.full(P.d, 0.1))
    s1 = dm.sweep(P, gammas=[0.01], betas=[0.5], steps=20)
    s2 = dm.sweep(P, gammas=[0.01], betas=[0.5], steps=20, alpha=0.01)
    assert np.asarray(s1["train_loss"]).tobytes() == np.asarray(s2["train_loss"]).tobytes()


# -- 4. NetworkProblem's fields -----------------------------------------------------------------------------------

def _problem(ts, **changes):
    fields = dict(X=ts.X, y=ts.y, X_test=None, y_test=None, widths=ts.widths, biases=ts.biases,
                  activation="relu", params0=ts.params0, teacher=ts.teacher, teacher_widths=ts.teacher_widths)
    fields.update(changes)
    return dm.NetworkProblem(**fields)


@pytest.mark.parametrize("changes, error, message", [
    (dict(biases=(1, 0)), TypeError, r"biases\[0\] must be True or False, got 1"),
    (dict(biases=("no", "no")), TypeError, r"biases\[0\] must be True or False, got 'no'"),
    (dict(biases=True), TypeError, r"biases must be a sequence"),
    (dict(biases="ab"), TypeError, r"biases must be a sequence"),
    (dict(widths=(2, 20.5, 1)), TypeError, r"widths\[1\] must be an integer"),
    (dict(widths=3), TypeError, r"widths must be a sequence"),
    (dict(teacher_widths=(2.7, 5, 1)), TypeError, r"teacher_widths\[0\] must be an integer in \[1, inf\), got 2.7"),
    (dict(teacher_widths=("a",)), TypeError, r"teacher_widths\[0\] must be an integer in \[1, inf\), got 'a'"),
    (dict(teacher_widths=None), ValueError, r"teacher and teacher_widths must be given together .* teacher without"),
    (dict(teacher=None), ValueError, r"teacher and teacher_widths must be given together .* teacher_widths without"),
    (dict(teacher_widths=(2, 6, 1)), ValueError, r"teacher must have shape \(24,\), got \(20,\)"),
    (dict(teacher_widths=(3, 5, 1)), ValueError, r"teacher_widths must have len\(widths\) = 3 entries .* start with "
                                                 r"widths\[0\] = 2"),
    (dict(teacher_widths=(2, 5, 5, 1)), ValueError, r"teacher_widths must have len\(widths\) = 3 entries"),
    (dict(teacher=np.zeros(20) + 1j), TypeError, r"teacher must be a real array"),
    (dict(params=None), TypeError, r"params must be a dict with str keys"),
    (dict(params={"a": object()}), TypeError, r"params\['a'\] must be JSON data"),
    (dict(activation=None), ValueError, r"activation must be one of"),
])
def test_network_problem_refuses_by_name(ts, changes, error, message):
    with pytest.raises(error, match=message):
        _problem(ts, **changes)


def test_network_problem_with_a_teacher_round_trips_a_store(ts, tmp_path):
    p = _problem(ts, biases=[np.True_, False], widths=np.array([2, 20, 1]), teacher_widths=[2, 5, 1])
    assert p.biases == (True, False) and p.widths == (2, 20, 1) and p.teacher_widths == (2, 5, 1)
    dm.mgd(p, 0.1, 0.5, steps=3, store=str(tmp_path / "t.h5"))
    back = dm.open_store(str(tmp_path / "t.h5")).problem
    assert back.teacher_widths == (2, 5, 1) and back.teacher.tobytes() == ts.teacher.tobytes()


# -- 5. the flat vectors of NetworkProblem's methods --------------------------------------------------------------

@pytest.mark.parametrize("method", ["train_loss", "test_loss", "unflatten", "output"])
@pytest.mark.parametrize("value, error, message", [
    (np.zeros(1000), ValueError, r"flat must have shape \(80,\), got \(1000,\)"),
    (np.zeros(3), ValueError, r"flat must have shape \(80,\), got \(3,\)"),
    (np.full(80, np.nan), ValueError, r"flat must contain only finite values"),
    (np.zeros(80) + 0j, TypeError, r"flat must be a real array: got complex input"),
    (np.zeros((2, 80)), ValueError, r"flat must be 1-dimensional"),
    (["a"] * 80, TypeError, r"flat must be a real array"),
])
def test_flat_vectors_are_checked(method, value, error, message):
    p = dm.teacher_student(n_test=10)
    with pytest.raises(error, match=message):
        getattr(p, method)(value)


def test_flat_methods_on_good_input(ts):
    w = ts.params0
    layers = ts.unflatten(w)
    assert np.shares_memory(layers[0][0], w)  # views of a float64 vector, as documented
    # an int or list vector is the same parameters
    assert ts.train_loss(list(np.zeros(ts.n_params))) == ts.train_loss(np.zeros(ts.n_params, dtype=np.int64))
    # independent NumPy loss
    W0, b0, W1 = w[:40].reshape(2, 20), w[40:60], w[60:80]
    r = np.maximum(ts.X @ W0 + b0, 0) @ W1 - ts.y
    assert ts.train_loss(w) == pytest.approx(r @ r / (2 * ts.n), rel=1e-13)
    with pytest.raises(ValueError, match=r"X must have shape \('\*', 2\), got \(3, 5\)"):
        ts.output(w, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="X must be 2-dimensional"):
        ts.output(w, np.zeros(2))


# -- 6. resume and overwrite together -----------------------------------------------------------------------------

BOTH = r"resume=True continues the store and overwrite=True replaces it: give one of them, not both"


def test_resume_with_overwrite_is_refused_and_the_store_kept(ts, tmp_path, capsys):
    net, diag = str(tmp_path / "net.h5"), str(tmp_path / "diag.h5")
    first = dm.networks_sweep(ts, gammas=[0.1], betas=[0.5], steps=5, store=net)
    P = dm.sparse_regression(n=5, d=8, seed=0)
    dm.sweep(P, gammas=[0.01], betas=[0.5], steps=5, store=diag)
    before = {path: open(path, "rb").read() for path in (net, diag)}
    with pytest.raises(ValueError, match=BOTH):
        dm.networks_sweep(ts, gammas=[0.1], betas=[0.5], steps=5, store=net, resume=True, overwrite=True)
    with pytest.raises(ValueError, match=BOTH):
        dm.sweep(ts, gammas=[0.1], betas=[0.5], steps=5, store=net, resume=True, overwrite=True)
    with pytest.raises(ValueError, match=BOTH):
        dm.sweep(P, gammas=[0.01], betas=[0.5], steps=5, store=diag, resume=True, overwrite=True)
    argv = ["network", "teacher-student", "--gammas", "0.1", "--betas", "0.5", "--steps", "5", "--store", net]
    assert main(argv + ["--resume", "--overwrite"]) == 2
    assert "--resume continues the store and --overwrite replaces it" in capsys.readouterr().err
    assert main(["sweep", "--gammas", "0.01", "--betas", "0.5", "--steps", "5", "--n", "5", "--d", "8",
                 "--store", diag, "--resume", "--overwrite"]) == 2
    assert "--resume continues the store and --overwrite replaces it" in capsys.readouterr().err
    for path, data in before.items():
        assert open(path, "rb").read() == data
    # each alone still works
    again = dm.networks_sweep(ts, gammas=[0.1], betas=[0.5], steps=5, store=net, resume=True)
    np.testing.assert_array_equal(again["train_loss"], first["train_loss"])


# -- 7. the params observable's dimension -------------------------------------------------------------------------

def test_recorded_params_have_a_parameter_dimension(ts, tmp_path):
    path = str(tmp_path / "p.h5")
    res = dm.mgd(ts, 0.1, 0.5, steps=6, record=dm.Record(every=2), record_params=True, store=path)
    with h5py.File(path, "r") as f:
        value = f["observables/params/value"]
        assert [s.name for s in value.dims[1].values()] == ["/observables/params/parameter"]
        assert value.dims[1][0][()].tolist() == list(range(ts.n_params))
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    with xr.open_dataset(path, group="observables/params", engine="h5netcdf") as ds:
        assert ds["value"].dims == ("time", "parameter")
    store = dm.open_store(path)
    assert store.to_xarray("params")["value"].dims == ("time", "parameter")
    np.testing.assert_array_equal(store.trajectory.extra["params"], res.trajectory.extra["params"])


def test_a_store_with_the_old_axis_name_is_read(ts, tmp_path):
    """Stores before this change named the axis ``axis1``: rebuilt here by renaming the scale; read as before."""
    path = str(tmp_path / "old.h5")
    res = dm.mgd(ts, 0.1, 0.5, steps=6, record=dm.Record(every=2), record_params=True, store=path)
    with h5py.File(path, "r+") as f:
        g = f["observables/params"]
        value = g["value"]
        value.dims[1].detach_scale(g["parameter"])
        del g["parameter"]
        g["axis1"] = np.arange(ts.n_params, dtype=np.int64)
        g["axis1"].make_scale("axis1")
        value.dims[1].attach_scale(g["axis1"])
    store = dm.open_store(path)
    np.testing.assert_array_equal(store.trajectory.extra["params"], res.trajectory.extra["params"])
    assert store.result.params.tobytes() == res.params.tobytes()
