"""dlnmomentum: momentum on 2-layer diagonal linear networks, with a compiled core.

Quick tour::

    import dlnmomentum as dm
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    res = dm.mgd(problem, gamma=0.05, beta=0.9, steps=100_000, record=dm.Record(log=200))
    print(res.summary())
"""

from .flow import FlowConfig, FlowResult, gf, mgd_time, mgf, mgf_from_mgd
from .mgd import MGDConfig, MGDResult, batch_indices, heavy_ball_quadratic, mgd
from .problem import Problem, sparse_regression
from .record import Record
from .results import Trajectory
from .status import CONVERGED, DIVERGED, INTERRUPTED, MAX_STEPS, RUNNING, STATUS_MESSAGES
from .store import StoreError, open_store, resume
from .sweep import Sweep, open_sweep, parse_grid, resume_sweep, sweep  # the function shadows the module name, like mgd

__version__ = "0.2.0"

__all__ = [
    "CONVERGED", "DIVERGED", "INTERRUPTED", "MAX_STEPS", "RUNNING", "STATUS_MESSAGES",
    "MGDConfig", "MGDResult", "Problem", "Record", "Trajectory",
    "batch_indices", "heavy_ball_quadratic", "mgd", "sparse_regression",
    "FlowConfig", "FlowResult", "gf", "mgd_time", "mgf", "mgf_from_mgd",
    "StoreError", "open_store", "resume",
    "Sweep", "open_sweep", "parse_grid", "resume_sweep", "sweep",
]
