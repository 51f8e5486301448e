"""``dlnm`` exit codes: one table for every command, documented in ``dlnm --help``."""

import pytest
from signal_helpers import sigint_once_handled

from dlnmomentum.cli import main
from dlnmomentum.cli.common import EXIT_DIVERGED, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK

SMALL = ["--n", "8", "--d", "13", "--s", "3", "--n-test", "50", "--data-seed", "4", "--no-progress"]


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # (argparse wraps the text where it fits)
    for code in (EXIT_OK, EXIT_DIVERGED, EXIT_ERROR, EXIT_INTERRUPTED):
        assert f"{code} " in out
    assert "exit codes" in out


def test_finished_diverged_and_bad_input():
    assert main(["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "100", *SMALL]) == EXIT_OK
    assert main(["run", "--gamma", "50", "--beta", "0.5", "--steps", "100", *SMALL]) == EXIT_DIVERGED
    assert main(["run", "--gamma", "0.01", "--beta", "1.5", "--steps", "100", *SMALL]) == EXIT_ERROR
    assert main(["inspect", "/nonexistent/store.h5"]) == EXIT_ERROR


@pytest.mark.parametrize("argv", [
    ["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "1e10"],
    ["flow", "--lam", "0.3", "--t-max", "1e5", "--scheme", "rk4"],  # (rodas would finish first)
    ["sweep", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "1e9", "--wave-size", "8"],
], ids=["run", "flow", "sweep"])
def test_an_interrupted_command_exits_130(argv, tmp_path):
    """Run, flow and sweep agree: SIGINT stops between chunks and the command exits 130.

    The signal is sent once the command's own handler is installed (over Python's default one, which
    the test installs, so that it also holds when the suite runs with SIGINT ignored: ``nohup``).
    """
    with sigint_once_handled() as sent:
        code = main([*argv, *SMALL, "--store", str(tmp_path / "s.h5")])
    assert sent["sent"] and code == EXIT_INTERRUPTED
