"""``dlnm figure`` / ``dlnm plot`` / ``dlnm reproduce``: every figure at tiny size writes a store and images,
re-plotting reads the store alone, stores are never replaced without ``--overwrite``, and the paper's claims
are asserted on stored numbers (not on numbers recomputed by the test)."""

import json
import os
import shutil

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.figures import FIGURES, common, designs, plot_store


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Every figure at tiny size, through the CLI (one run, shared by the tests of this module)."""
    out = tmp_path_factory.mktemp("figures")
    assert main(["reproduce", "--tiny", "--out", str(out), "--json"]) == 0
    return out


def _summary(path):
    with h5py.File(path, "r") as h5:
        return common.read_attrs(h5)[3]


def test_every_figure_writes_a_store_and_images(tiny):
    for name in FIGURES:
        store = tiny / f"{name}.h5"
        assert store.exists(), name
        for ext in ("png", "pdf"):
            assert (tiny / f"{name}.{ext}").stat().st_size > 5000, (name, ext)
        with h5py.File(store, "r") as h5:
            got, size, _, summary = common.read_attrs(h5)
            assert got == name and size == "tiny" and isinstance(summary, dict)


def test_plot_redraws_from_the_store_alone(tiny, tmp_path, monkeypatch):
    # no parts, and any attempt to run a sweep or a flow fails: plot must only read the store
    store = tmp_path / "mgd-grid.h5"
    shutil.copy(tiny / "mgd-grid.h5", store)

    def forbidden(*args, **kwargs):
        raise AssertionError("plot ran a computation")

    for name in ("sweep", "mgd", "mgf", "gf"):
        monkeypatch.setattr(dm.api, name, forbidden)
    monkeypatch.setattr(dm.figures.common, "sweep", forbidden)
    out = tmp_path / "images"
    assert main(["plot", str(store), "--out", str(out)]) == 0
    assert (out / "mgd-grid.png").stat().st_size > 5000 and (out / "mgd-grid.pdf").stat().st_size > 5000
    for name in FIGURES:  # every stored figure redraws
        images = plot_store(str(tiny / f"{name}.h5"), str(tmp_path / "all"))
        assert all(os.path.getsize(p) > 5000 for p in images)


def test_stores_are_kept_without_overwrite(tiny, tmp_path, capsys):
    shutil.copy(tiny / "mgf-triple.h5", tmp_path / "mgf-triple.h5")
    before = (tmp_path / "mgf-triple.h5").read_bytes()
    assert main(["figure", "mgf-triple", "--quick", "--out", str(tmp_path)]) == 2  # a tiny store, asked for quick
    assert "--overwrite" in capsys.readouterr().err
    with pytest.raises(dm.StoreError, match="exists"):
        common.new_store(str(tmp_path / "mgf-triple.h5"), "mgf-triple", "tiny")
    assert (tmp_path / "mgf-triple.h5").read_bytes() == before
    assert main(["figure", "mgf-triple", "--tiny", "--out", str(tmp_path)]) == 0  # same size: redrawn, kept
    assert (tmp_path / "mgf-triple.h5").read_bytes() == before
    assert main(["plot", str(tmp_path / "nothing.h5")]) == 2


def test_two_processes_making_one_figure_store_write_different_temporary_files(tmp_path, monkeypatch):
    # two processes computing the same figure into one --out: each writes its own temporary file, so their
    # writes cannot interleave in one file that is then renamed into place
    path = str(tmp_path / "mgf-triple.h5")
    written = []
    image = common.write_h5_image
    monkeypatch.setattr(common, "write_h5_image", lambda f, tmp: (written.append(tmp), image(f, tmp)))
    made = []
    for pid in (111, 222):
        monkeypatch.setattr(common.os, "getpid", lambda pid=pid: pid)
        made.append(common.new_store(path, "mgf-triple", "tiny"))
    for f, tmp in made:
        common.finish_store(f, tmp, path, {"a": 1}, {"b": 2})
    assert len(set(written)) == 2 and all(str(tmp_path) in name for name in written)
    assert sorted(os.listdir(tmp_path)) == ["mgf-triple.h5"]
    with h5py.File(path, "r") as f:
        assert f.attrs["kind"] == "figure" and f.attrs["figure"] == "mgf-triple"


def test_plot_refuses_a_sweep_store(tiny, capsys):
    part = next((tiny / "parts").glob("sweep-*.h5"))
    assert main(["plot", str(part)]) == 2
    assert "not a figure store" in capsys.readouterr().err


def test_status_is_reported_and_marks_follow_it(tiny):
    with h5py.File(tiny / "mgd-grid.h5", "r") as h5:
        sw = common.get_sweep(h5, "mgd")
        summary = json.loads(h5.attrs["summary"])
    status = np.asarray(sw.data["status"])
    assert summary["mgd"]["points"] == sw.done.sum() == status.size
    assert sum(summary["mgd"]["status"].values()) == status.size
    reached = (np.asarray(sw.data["train_loss"]) <= designs.FIT_TOL) | (status == dm.Status.CONVERGED)
    assert summary["mgd"]["reached_tol"] == int(reached.sum())
    # theory fields: a value exactly where the run reached the fit tolerance, else NaN with a reason
    reason = np.asarray(sw.data["theory_reason"])
    assert np.all(np.isfinite(sw.data["prediction_gap"][reason == 0]))
    assert np.all(np.isnan(sw.data["prediction_gap"][reason != 0]))
    assert set(np.unique(reason[~reached])) <= {2, 3}


# -- the claims, on stored numbers --------------------------------------------------------------------

def test_claim_delta_decreases_with_small_lambda_and_mgf_beats_gf(tiny):
    with h5py.File(tiny / "mgf-lambda.h5", "r") as h5:
        sw = common.get_sweep(h5, "mgf")
        summary = json.loads(h5.attrs["summary"])
    lams = sw.coords["lam"]
    delta = common.mean_over_reps(sw, "delta_inf_norm")
    test = common.mean_over_reps(sw, "test_loss")
    assert lams[0] == 0 and lams[1] > 0
    assert delta[1] < delta[0]  # ||Delta_inf|| decreases from gradient flow to small lambda
    assert test[1] < test[0]  # MGF beats GF on mu = 1 data
    assert summary["delta_decreases_for_small_lam"] is True


def test_claim_equal_lambda_agrees_better_than_equal_gamma(tmp_path):
    """Proposition 1: at a fixed λ, MGD(λ(1-β)², β) for several β ends at nearly the same ‖Δ∞‖ and test loss;
    at a fixed γ over the same β the ends are far apart. Asserted on the sweep store's numbers.

    Measured (paper data, seed 0): log10 spread of ‖Δ∞‖ 0.30 at λ = 0.5 against 1.68 at γ = 0.02, of the
    test loss 0.13 against 2.0."""
    lam, gamma, betas = 0.5, 0.02, (0.5, 0.8, 0.9)
    pairs = [(lam * (1 - b) ** 2, b) for b in betas] + [(gamma, b) for b in (0.5, 0.9)]  # (0.02, 0.8) is shared
    path = str(tmp_path / "pairs.h5")
    dm.sweep(common.PAPER_DATA, pairs=pairs, steps=2_000_000, tol=1e-14, store=path)
    sw = dm.open_sweep(path)
    assert np.all(np.asarray(sw["train_loss"]) < 1e-10)
    for field in ("delta_inf_norm", "test_loss"):
        v = np.log10(np.asarray(sw[field][0]))
        same_lam = np.ptp(v[:3])
        same_gamma = np.ptp(v[[1, 3, 4]])
        assert same_lam < 0.3 * same_gamma, (field, same_lam, same_gamma)


def test_claim_corollary3_no_crossing_runs_end_more_balanced(tiny):
    summary = _summary(tiny / "mgd-grid.h5")["corollary3"]
    assert summary["runs_without_sign_changes"] > 0
    assert summary["with_delta_inf_below_delta0"] == summary["runs_without_sign_changes"]


def test_claim_acceleration_rule_on_the_quadratic(tiny):
    with h5py.File(tiny / "quadratic.h5", "r") as h5:
        claims = {k: float(h5["claims"][k][()]) for k in h5["claims"]}
    assert claims["rule_at_2k"] < 0.2 * claims["rule_at_k"]  # MGD(4γ, 1-2(1-β)) at k follows MGD(γ, β) at 2k
    assert claims["gd4_at_4k"] < 0.1 * claims["gd4_at_2k"]  # GD(4γ) at k follows GD(γ) at 4k


def test_network_figures_store_what_lambda_explains_and_the_points_that_never_fit(tiny):
    """The λ measure comes with its controls (findings (d)); teacher-student counts the points stopped at the
    cap above train loss 1e-5, with their final losses, from the stored sweep (finding (e))."""
    from dlnmomentum.figures.networks import SPREAD_KEYS

    for name, fields in (("deep-linear", ("train_loss", "test_loss")), ("teacher-student", ("test_loss",))):
        shares = _summary(tiny / f"{name}.h5")["explained_share"]
        assert set(shares) == set(fields) and all(set(shares[f]) == set(SPREAD_KEYS) for f in fields)
    summary = _summary(tiny / "teacher-student.h5")
    with h5py.File(tiny / "teacher-student.h5", "r") as h5:
        sw = common.get_sweep(h5, "network")
    status = np.asarray(sw.data["status"])
    capped = status == dm.Status.MAX_STEPS
    nr = summary["not_reached"]
    assert nr["points"] == int(capped.sum()) and nr["of"] == status.size
    if nr["points"]:
        losses = np.asarray(sw.data["train_loss"])[capped]
        assert nr["train_loss_min"] == losses.min() > 1e-5 and nr["train_loss_max"] == losses.max()
        assert sum(c for _, c in nr["plateaus"]) <= nr["points"]


def test_findings_script_prints_every_finding_from_the_stores(tiny):
    """``scripts/findings.py`` reads every finding from the tiny stores; (g)'s count is checked against the
    store's train losses read here with h5py."""
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts", "findings.py")
    out = subprocess.run([sys.executable, script, str(tiny)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for label in "abcdefgh":
        assert f"({label}) " in out.stdout
    with h5py.File(tiny / "mgd-grid.h5", "r") as h5:
        loss = h5["mgd/train_loss"][...]
        done = h5["mgd/done"][...].astype(bool)
    fit = int((done & (loss <= designs.FIT_TOL)).sum())
    line = next(x for x in out.stdout.splitlines() if x.startswith("(g) "))
    assert f"{fit} of {int(done.sum())} runs reach train loss" in line
    assert f"cap {designs.settings('tiny')['steps']} steps" in line


def test_a_part_sweep_another_process_writes_is_waited_for(tmp_path, monkeypatch):
    # Figures that share a sweep, computed at the same time into one --out (a job array), both need its part
    # store: the second used to stop with StoreLockedError; it waits for the writer, then reads the part.
    import threading

    from dlnmomentum.store.files import WriterLock

    args = dict(gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=100, reps=1)
    first = common.run_sweep(str(tmp_path / "a"), dict(n=8, d=13, s=3), log=lambda line: None, **args)
    name = next((tmp_path / "a").glob("sweep-*.h5")).name
    (tmp_path / "b").mkdir()
    lock = WriterLock.acquire(str(tmp_path / "b" / name), "writing a sweep")  # a live writer holds the part
    monkeypatch.setattr(common, "PART_WAIT_SECONDS", 0.05, raising=False)
    lines = []
    timer = threading.Timer(0.5, lock.release)
    timer.start()
    try:
        second = common.run_sweep(str(tmp_path / "b"), dict(n=8, d=13, s=3), log=lines.append, **args)
    finally:
        timer.cancel()
        lock.release()
    assert "waiting for the process that computes it" in lines[0] and len(lines) == 2
    assert second.complete
    for field in ("train_loss", "theta", "status"):
        assert np.asarray(second[field]).tobytes() == np.asarray(first[field]).tobytes()
