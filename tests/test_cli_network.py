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


def test_the_teacher_student_choices_reach_the_problem(tmp_path, capsys):
    """--init-scale, --no-hidden-bias and --output-bias are dm.teacher_student's arguments (the figure's problem
    takes init_scale 0.5); a sweep store keeps them and its --resume compares them; deep-linear refuses them."""
    assert main(["network", "teacher-student", "--gamma", "0.1", "--beta", "0.5", "--steps", "300", "--json",
                 "--no-progress", "--init-scale", "0.5", "--no-hidden-bias", "--output-bias"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = dm.mgd(dm.teacher_student(init_scale=0.5, hidden_bias=False, output_bias=True), 0.1, 0.5, steps=300)
    assert out["train_loss"] == ref.train_loss and out["params"] == ref.params.tolist()
    path = str(tmp_path / "ts.h5")
    argv = ["network", "teacher-student", "--gammas", "0.1", "--betas", "0,0.5", "--steps", "50", "--store", path]
    assert main(argv + ["--init-scale", "0.5"]) == 0
    stored = dm.open_sweep(path)
    ref = dm.networks_sweep({"generator": "teacher_student", "init_scale": 0.5}, gammas=[0.1], betas=[0, 0.5],
                            steps=50)
    np.testing.assert_array_equal(stored["train_loss"], ref["train_loss"])
    capsys.readouterr()
    assert main(argv + ["--resume", "--init-scale", "1"]) == 2  # the stored sweep has init_scale 0.5
    assert "--init-scale differs from the stored sweep" in capsys.readouterr().err
    assert main(argv + ["--resume", "--output-bias"]) == 2
    assert "--output-bias differs" in capsys.readouterr().err
    assert main(argv + ["--resume", "--init-scale", "0.5"]) == 0
    assert main(argv + ["--resume"]) == 0  # (options left out: the stored sweep as it is)
    assert main(["network", "deep-linear", "--gamma", "0.01", "--beta", "0", "--steps", "5", "--init-scale",
                 "0.5"]) == 2
    assert "--init-scale is an option of teacher-student" in capsys.readouterr().err
