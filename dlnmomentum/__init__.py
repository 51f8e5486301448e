"""dlnmomentum: momentum on 2-layer diagonal linear networks, with a compiled core.

Quick tour::

    import dlnmomentum as dm
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    res = dm.mgd(problem, gamma=0.05, beta=0.9, steps=100_000, record=dm.Record(log=200))
    print(res.summary())

Layers (each imports only its own layer and those below it; ``docs/architecture.md``): the command
line and the figures (:mod:`.cli`, :mod:`.figures`) → the API (:mod:`.api`) → stores and sweeps
(:mod:`.store`, :mod:`.sweeps`) → run kinds (:mod:`.runs`) → driver and results (:mod:`.driver`,
:mod:`.results`, with :mod:`.problem`, :mod:`.networks`, :mod:`.record`, :mod:`.status`, :mod:`.theory`,
:mod:`.validate`, :mod:`.plots`, :mod:`.progress`) → the Numba kernels (:mod:`.kernels`).
"""

from . import theory
from .api import gf, mgd, mgf, mgf_from_mgd, networks_sweep, resume_sweep, sweep
from .networks import NetworkProblem, deep_linear, teacher_student
from .problem import Problem, sparse_regression
from .record import Record
from .results import Trajectory
from .runs.flow import FlowConfig, FlowResult
from .runs.flow_from_mgd import mgd_time
from .runs.mgd import MGDConfig, MGDResult, batch_indices
from .runs.network import NetworkConfig, NetworkResult
from .runs.quadratic import (
    QuadraticFlowPath,
    QuadraticPath,
    heavy_ball_quadratic,
    heavy_ball_quadratic_path,
    quadratic_flow,
)
from .status import CONVERGED, DIVERGED, INTERRUPTED, MAX_STEPS, RUNNING, STALLED, STATUS_MESSAGES, Status
from .store import StoreBusyError, StoreCorruptError, StoreError, open_store, resume
from .sweeps.execute import open_sweep
from .sweeps.grid import parse_grid
from .sweeps.networks import open_networks_sweep, resume_networks_sweep
from .sweeps.result import Sweep

__version__ = "0.6.0"


def __getattr__(name):
    # The figures (layer 5, Matplotlib) load on first use, so that `dm.figures.open_figure(path)`, as the readers'
    # messages write it, works after `import dlnmomentum as dm` without making every import pay for Matplotlib.
    if name == "figures":
        import importlib

        return importlib.import_module(".figures", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CONVERGED", "DIVERGED", "INTERRUPTED", "MAX_STEPS", "RUNNING", "STALLED", "STATUS_MESSAGES", "Status",
    "MGDConfig", "MGDResult", "Problem", "Record", "Trajectory",
    "batch_indices", "heavy_ball_quadratic", "mgd", "sparse_regression",
    "QuadraticFlowPath", "QuadraticPath", "heavy_ball_quadratic_path", "quadratic_flow",
    "FlowConfig", "FlowResult", "gf", "mgd_time", "mgf", "mgf_from_mgd",
    "StoreBusyError", "StoreCorruptError", "StoreError", "open_store", "resume",
    "Sweep", "open_sweep", "parse_grid", "resume_sweep", "sweep",
    "theory",
    "NetworkConfig", "NetworkProblem", "NetworkResult", "deep_linear", "teacher_student",
    "networks_sweep", "open_networks_sweep", "resume_networks_sweep",
]
