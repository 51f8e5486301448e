"""``dlnm network``: one run equals ``dm.mgd`` on the same network problem; a sweep equals ``dm.networks_sweep``
and resumes from its store; bad input is an error naming what is missing (exit code 2)."""

import json

import numpy as np

import dlnmomentum as dm
from dlnmomentum.cli import main


def test_one_run_equals_the_api(capsys):
    assert main(["network", "teacher-student", "--gamma", "0.1", "--beta", "0.5", "--steps", "3000", "--json",
                 "--no-progress", "--data-seed", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = dm.mgd(dm.teacher_student(seed=2), 0.1, 0.5, steps=3000)
    assert out["train_loss"] == ref.train_loss and out["test_loss"] == ref.test_loss
    assert out["status_name"] == "max_steps" and out["steps_done"] == 3000


def test_sweep_stores_and_resumes(tmp_path, capsys):
    path = str(tmp_path / "dl.h5")
    argv = ["network", "deep-linear", "--widths", "30,20,1", "--gammas", "1e-3,1e-2", "--betas", "0,0.9",
            "--steps", "50", "--reps", "2", "--store", path]
    assert main(argv) == 0
    assert "done         : 8/8 points" in capsys.readouterr().out
    ref = dm.networks_sweep({"generator": "deep_linear", "widths": (30, 20, 1)}, gammas=[1e-3, 1e-2],
                            betas=[0, 0.9], steps=50, reps=2)
    stored = dm.open_sweep(path)
    np.testing.assert_array_equal(stored["train_loss"], ref["train_loss"])
    assert main(argv + ["--resume"]) == 0  # a finished store: nothing to run, the same summary
    assert main(argv) == 2  # exists, no --resume or --overwrite
    assert "exists" in capsys.readouterr().err


def test_errors_name_what_is_missing(capsys):
    assert main(["network", "teacher-student", "--gamma", "0.1", "--steps", "10"]) == 2
    assert "--gamma and --beta" in capsys.readouterr().err
    assert main(["network", "deep-linear", "--gammas", "0.1", "--steps", "10"]) == 2
    assert "--gammas and --betas" in capsys.readouterr().err
