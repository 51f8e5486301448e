"""``--resume`` with other grid arguments is refused by name; a closed terminal (SIGHUP) stops cleanly (issue 23, B16).

Before: ``dlnm sweep/network --store X --resume`` with 9 gammas where 8 were stored, or ``--batch-size 5`` on a
full-batch sweep, silently ran the stored sweep (exit 0), while the Python API refused the same request by name.
SIGHUP (the terminal closed) killed a run between checkpoints, leaving a ``crashed`` store and losing up to
``checkpoint_every`` of work, where SIGTERM closed it cleanly; it is now a stop request like SIGTERM, and stays
ignored where the process inherited it ignored (``nohup``).
"""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from store_checks import ROOT, SPEC, TIMEOUT, assert_same_result, assert_same_rows, run_helper, stored_reference

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.cli import main
from dlnmomentum.runs.points import FIELDS

SMALL_ARGS = ["--n", "8", "--d", "13", "--n-test", "50"]
SWEEP = ["sweep", "--gammas", "1e-3:1e-1:8:log", "--betas", "0,0.5", "--steps", "200", "--no-progress", *SMALL_ARGS]
NET_ARGS = ["--n", "6", "--d", "2", "--teacher-width", "2", "--student-width", "3", "--n-test", "20"]
NETWORK = ["network", "teacher-student", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "200",
           "--no-progress", *NET_ARGS]


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("resume") / "s.h5"
    assert main([*SWEEP, "--store", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def network_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("resume") / "ts.h5"
    assert main([*NETWORK, "--store", str(path)]) == 0
    return path


OTHER = "holds a sweep made with other arguments: "
SWEEP_CASES = {
    "9 gammas": (["--gammas", "1e-3:1e-1:9:log"], OTHER + "--gammas differs from the stored sweep (in gammas)"),
    "batch size": (["--batch-size", "5"], OTHER + "--batch-size differs from the stored sweep (in kind, batch_size)"),
    "steps and alpha": (["--steps", "300", "--alpha", "0.02"],
                        OTHER + "--steps, --alpha differ from the stored sweep (in alpha, steps)"),
    "data": (["--d", "14"], OTHER + "--d differs from the stored sweep (in spec, d)"),
    "a flow line": (["--lams", "0,0.1", "--t-max", "10"], "holds another sweep than --lams, --t-max describe"),
}


@pytest.mark.parametrize("case", list(SWEEP_CASES))
def test_sweep_resume_refuses_other_grid_arguments_by_name(sweep_store, capsys, case):
    extra, says = SWEEP_CASES[case]
    before = sweep_store.read_bytes()
    assert main(["sweep", "--store", str(sweep_store), "--resume", "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    assert f"--store {sweep_store} {says}" in err, err
    assert "--resume continues the stored sweep as it is" in err, err
    assert sweep_store.read_bytes() == before  # refused before any work


def test_sweep_resume_with_the_stored_arguments_continues(sweep_store, capsys):
    assert main([*SWEEP, "--store", str(sweep_store), "--resume"]) == 0  # all of them given, all equal
    assert main(["sweep", "--store", str(sweep_store), "--resume", "--no-progress", "--steps", "2e2"]) == 0
    assert "differ" not in capsys.readouterr().err


NETWORK_CASES = {
    "3 gammas": (["--gammas", "0.01,0.02,0.03"], "--gammas differs", "gammas"),
    "batch size": (["--batch-size", "5"], "--batch-size differs", "kind, batch_size"),
    "data seed": (["--data-seed", "3"], "--data-seed differs", "seed"),
    "student": (["--student-width", "4"], "--student-width differs", "spec"),
}


@pytest.mark.parametrize("case", list(NETWORK_CASES))
def test_network_resume_refuses_other_grid_arguments_by_name(network_store, capsys, case):
    extra, says, keys = NETWORK_CASES[case]
    before = network_store.read_bytes()
    assert main(["network", "teacher-student", "--store", str(network_store), "--resume", "--no-progress",
                 *extra]) == 2
    err = capsys.readouterr().err
    assert f"--store {network_store} holds a sweep made with other arguments: {says} from the stored sweep" in err
    assert f"(in {keys}" in err, err
    assert network_store.read_bytes() == before


def test_network_resume_refuses_another_architecture(network_store, capsys):
    assert main(["network", "deep-linear", "--store", str(network_store), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--store {network_store} holds a teacher-student sweep, not deep-linear" in err, err
    assert main([*NETWORK, "--store", str(network_store), "--resume"]) == 0  # the stored arguments: continues


# -- SIGHUP ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return stored_reference(tmp_path_factory)


def test_sighup_stops_a_run_cleanly_and_it_resumes_bit_for_bit(tmp_path, reference):
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": "chunk", "count": 6, "signal": "HUP"}))
    assert out.returncode == 0, (out.returncode, out.stderr)  # before: killed by SIGHUP (-1)
    assert out.stdout.split("STATUS ", 1)[1].startswith("interrupted"), out.stdout
    s = S.open_store(path)
    assert s.state == "interrupted" and s.checkpoint is not None, s.state  # before: "crashed"
    live, ref_path = reference
    assert_same_result(live, S.resume(path))
    assert_same_rows(path, ref_path)


def test_sighup_inherited_as_ignored_stays_ignored(tmp_path, reference):
    path = tmp_path / "r.h5"
    kills = [{"point": "chunk", "count": 3, "signal": "HUP"}, {"point": "chunk", "count": 12, "signal": "TERM"}]
    out = run_helper(dict(SPEC, path=str(path), action="run", sighup_ignored=True, kill=kills))
    assert out.returncode == 0, out.stderr
    status = out.stdout.split("STATUS ", 1)[1].split()
    assert status[0] == "interrupted" and int(status[1]) >= 12 * SPEC["chunk_steps"], out.stdout  # not at chunk 3
    assert_same_result(reference[0], S.resume(path))


def _default_sighup():
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as from a terminal, also when the suite runs under nohup


def test_sighup_stops_a_sweep_cleanly_and_it_resumes(tmp_path):
    path = tmp_path / "g.h5"
    argv = ["sweep", "--gammas", "0.01:0.1:8", "--betas", "0:0.9:4", "--steps", "2e6", "--wave-size", "8", "--log",
            "--no-progress", "--store", str(path), *SMALL_ARGS]
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "dlnmomentum", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=_default_sighup)
    try:
        for line in proc.stderr:
            if "wrote 8/32" in line:
                proc.send_signal(signal.SIGHUP)
                break
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)  # before: killed by SIGHUP (-1)
    assert "interrupted" in err and f"continue with: dlnm sweep --resume --store {path}" in err, err
    stopped = dm.open_sweep(path)
    assert 8 <= int(stopped.done.sum()) < 32
    assert main(["sweep", "--store", str(path), "--resume", "--no-progress"]) == 0
    data = {"n": 8, "d": 13, "s": 5, "mu": 1.0, "sigma": 1.0, "n_test": 50}  # the command line's
    fresh = dm.sweep(data, gammas="0.01:0.1:8", betas="0:0.9:4", steps=2_000_000)
    for name in FIELDS:
        assert np.array_equal(dm.open_sweep(path)[name], fresh[name], equal_nan=True), name


def test_the_same_data_written_another_way_resumes(tmp_path, capsys):
    """A spec that leaves sparse_regression's (or the network generator's) defaults out and the command line's full
    spec are the same data: resume refused them as "differs in spec", and `--mu 1` (the default) as "--mu differs"."""
    path = str(tmp_path / "s.h5")
    assert main(["sweep", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "200", "--store", path,
                 "--no-progress", *SMALL_ARGS]) == 0
    sw = dm.sweep(dict(n=8, d=13, n_test=50), gammas=[0.01, 0.02], betas=[0, 0.5], steps=200, store=path,
                  resume=True)
    assert sw.complete
    with pytest.raises(S.StoreError, match=r"differs in spec"):
        dm.sweep(dict(n=8, d=13, n_test=50, s=4), gammas=[0.01, 0.02], betas=[0, 0.5], steps=200, store=path,
                 resume=True)
    api = str(tmp_path / "a.h5")
    dm.sweep(dict(n=8, d=13, n_test=50), gammas=[0.01, 0.02], betas=[0, 0.5], steps=200, store=api)
    assert main(["sweep", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "200", "--mu", "1", "--store", api,
                 "--resume", "--no-progress", *SMALL_ARGS]) == 0
    net = str(tmp_path / "n.h5")
    assert main(["network", "deep-linear", "--widths", "13,5,1", "--gammas", "0.01", "--betas", "0,0.5", "--steps",
                 "20", "--n", "8", "--d", "13", "--store", net, "--no-progress"]) == 0
    assert dm.networks_sweep({"generator": "deep_linear", "widths": [13, 5, 1], "n": 8, "d": 13}, gammas=[0.01],
                             betas=[0, 0.5], steps=20, store=net, resume=True).complete
    assert main(["network", "deep-linear", "--widths", "13,5,1", "--init-std", "0.1", "--n", "8", "--d", "13",
                 "--store", net, "--resume", "--no-progress"]) == 0


def test_a_refusal_names_the_option_that_changed(tmp_path, capsys):
    """`--batch-size 5` with the stored grid named "--gammas, --betas, --steps, --batch-size" (it changes the kind)."""
    path = str(tmp_path / "s.h5")
    argv = ["sweep", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "200", "--store", path, "--no-progress",
            *SMALL_ARGS]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv + ["--resume", "--batch-size", "5"]) == 2
    assert "other arguments: --batch-size differs from the stored sweep (in kind, batch_size)" in \
        capsys.readouterr().err
