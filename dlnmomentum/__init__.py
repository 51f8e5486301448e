"""dlnmomentum: momentum on 2-layer diagonal linear networks, with a compiled core.

Quick tour::

    import dlnmomentum as dm
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    res = dm.mgd(problem, gamma=0.05, beta=0.9, steps=100_000, record=dm.Record(log=200))
    print(res.summary())
"""

from .mgd import MGDConfig, MGDResult, batch_indices, heavy_ball_quadratic, mgd
from .problem import Problem, sparse_regression
from .record import Record
from .results import Trajectory
from .status import CONVERGED, DIVERGED, INTERRUPTED, MAX_STEPS, RUNNING, STATUS_MESSAGES

__version__ = "0.1.0"

__all__ = [
    "CONVERGED", "DIVERGED", "INTERRUPTED", "MAX_STEPS", "RUNNING", "STATUS_MESSAGES",
    "MGDConfig", "MGDResult", "Problem", "Record", "Trajectory",
    "batch_indices", "heavy_ball_quadratic", "mgd", "sparse_regression",
]
