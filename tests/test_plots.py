"""The plotting helpers draw the data they are given (checked on the artists, and as written PNGs)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import dlnmomentum as dm  # noqa: E402
from dlnmomentum.plots import plot_against_lambda, plot_trajectory  # noqa: E402


def test_plot_trajectory_of_an_mgd_run(small_problem, tmp_path):
    res = dm.mgd(small_problem, 0.05, 0.5, steps=2000, record=dm.Record(log=30))
    fig = plot_trajectory(res)
    ax_loss, ax_delta = fig.axes
    tr = res.trajectory
    keep = tr.step > 0
    x, y = ax_loss.lines[0].get_data()
    np.testing.assert_array_equal(x, tr.step[keep])
    np.testing.assert_array_equal(y, tr.train_loss[keep])
    np.testing.assert_array_equal(ax_delta.lines[0].get_ydata(), np.linalg.norm(tr.delta[keep], axis=1))
    assert "β=0.5" in fig._suptitle.get_text()
    path = tmp_path / "traj.png"
    fig.savefig(path)
    assert path.stat().st_size > 1000


def test_plot_trajectory_of_a_flow_uses_time(small_problem):
    res = dm.mgf(small_problem, 0.5, t_max=5.0, record=dm.Record(every=0.5))
    fig = plot_trajectory(res)
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_xdata(), res.trajectory.time[res.trajectory.time > 0])
    assert fig.axes[0].get_xlabel() == "time t"


def test_plot_trajectory_needs_a_recorded_run(small_problem):
    res = dm.mgd(small_problem, 0.05, 0.5, steps=10)
    with pytest.raises(ValueError, match="record="):
        plot_trajectory(res)


def test_plot_against_lambda(tmp_path):
    lams = np.array([0.0, 0.1, 1.0])
    values = [np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.5, 3.5])]
    fig = plot_against_lambda(lams, values, labels=["a", "b"], ylabel="test loss")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "test loss" and ax.get_xscale() == "log"
    np.testing.assert_array_equal(ax.collections[1].get_offsets()[:, 1], values[1])
    fig.savefig(tmp_path / "lam.png")
