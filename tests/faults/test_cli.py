"""The command line: no silent "record nothing", one JSON dialect (standard), sweep stores in --json, and
a foreign file with only ``kind = "sweep"`` is an error message, not a KeyError traceback.

Exit codes are ``cli/common.py``'s: 0 finished, 1 diverged, 2 bad input or unusable file, 130 interrupted.
"""

import json

import h5py
import pytest

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.cli import main
from dlnmomentum.cli.common import EXIT_DIVERGED, EXIT_ERROR, EXIT_OK

SMALL = ["--n", "8", "--d", "13", "--s", "3", "--n-test", "50", "--data-seed", "4", "--no-progress"]
RUN = ["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "100"]
FLOW = ["flow", "--lam", "0.3", "--t-max", "2"]


def strict_json(text):
    """JSON as the standard has it: NaN, Infinity and -Infinity are not JSON."""
    def refuse(token):
        raise AssertionError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("argv", [
    RUN + ["--record-log", "0"], RUN + ["--record-every", "0"], RUN + ["--record-every", "-3"],
    FLOW + ["--record-log", "0"], FLOW + ["--record-every", "0"], FLOW + ["--record-every", "-0.5"],
], ids=["run-log-0", "run-every-0", "run-every-neg", "flow-log-0", "flow-every-0", "flow-every-neg"])
def test_recording_nothing_is_refused_naming_the_option(argv, capsys):
    assert main([*argv, *SMALL]) == EXIT_ERROR
    option = next(a for a in argv if a.startswith("--record"))
    assert f"dlnm: error: {option} must be" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [RUN, FLOW], ids=["run", "flow"])
def test_both_record_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--record-log", "5", "--record-every", "2", *SMALL])
    assert info.value.code == EXIT_ERROR
    assert "not allowed with argument" in capsys.readouterr().err


def test_diverged_run_json_is_standard_json(capsys, tmp_path):
    argv = ["run", "--gamma", "50", "--beta", "0.9", "--steps", "2000", "--json", *SMALL]
    assert main(argv) == EXIT_DIVERGED
    out = strict_json(capsys.readouterr().out)
    assert out["status_name"] == "diverged" and out["non_finite"], out["non_finite"]
    assert all(out[name] is None or isinstance(out[name], list) for name in out["non_finite"])
    path = tmp_path / "d.h5"
    assert main([*argv, "--store", str(path)]) == EXIT_DIVERGED
    capsys.readouterr()
    assert main(["inspect", str(path), "--json"]) == EXIT_OK
    assert strict_json(capsys.readouterr().out)["status"] == "diverged"


def test_inspect_json_of_a_sweep_store(tmp_path, capsys):
    path = tmp_path / "g.h5"
    assert main(["sweep", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "200", "--store", str(path),
                 *SMALL]) == EXIT_OK
    capsys.readouterr()
    assert main(["inspect", str(path), "--json"]) == EXIT_OK
    out = strict_json(capsys.readouterr().out)
    assert out["kind"] == "mgd" and out["dims"] == ["rep", "beta", "gamma"] and out["done"] == out["points"] == 4
    assert out["format"] == "dlnmomentum-sweep" and out["status"] == {"max_steps": 4}


@pytest.mark.parametrize("ours", [False, True])
def test_a_file_that_only_claims_to_be_a_sweep(tmp_path, capsys, ours):
    """``kind = "sweep"`` alone is another program's file; with the package's format too it is an incomplete sweep
    store."""
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        f.attrs["kind"] = "sweep"
        if ours:
            f.attrs["format"] = "dlnmomentum-sweep"
    said = "is incomplete: it has no 'config' attribute" if ours else "none of the files dlnmomentum writes"
    for argv in (["inspect", str(path)], ["inspect", str(path), "--json"],
                 ["sweep", "--resume", "--store", str(path), "--no-progress"]):
        assert main(argv) == EXIT_ERROR, argv
        err = capsys.readouterr().err
        assert said in err and str(path) in err, err
    for call in (dm.open_sweep, dm.resume_sweep):
        with pytest.raises(S.StoreCorruptError if ours else S.StoreError, match=said):
            call(path)


def test_flow_takes_checkpoint_every(tmp_path, capsys):
    path = tmp_path / "f.h5"
    assert main([*FLOW, "--store", str(path), "--checkpoint-every", "0", "--record-every", "0.5", *SMALL]) == EXIT_OK
    assert dm.open_store(path).state == "complete"
    assert main([*FLOW, "--store", str(tmp_path / "g.h5"), "--checkpoint-every", "-1", *SMALL]) == EXIT_ERROR
    assert "--checkpoint-every must be in [0, inf)" in capsys.readouterr().err
