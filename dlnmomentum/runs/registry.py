"""The run kinds and the stable names under which their types are written into files.

Stores and sweeps reach a run kind through this registry, never through a Python module
path: a file says ``run_class = "MGDRun"`` or ``result_class = "FlowResult"``, and
:func:`resolve` maps the name back to the class of whatever version reads it. Files written
by 0.2.0 hold module paths (``"dlnmomentum.mgd:MGDResult"``); those are mapped through
:data:`LEGACY_NAMES`, so a reorganisation of the package never orphans a stored run.

Adding a run kind: give its run class a ``family``, add the family to :data:`RUN_FAMILIES`
and every type its store holds (run, config, result) to :data:`TYPES`.
"""

from ..networks import NetworkProblem
from ..problem import Problem
from ..results import Trajectory
from .flow import FlowConfig, FlowResult, FlowRun
from .flow_adaptive import AdaptiveFlowRun
from .mgd import MGDConfig, MGDResult, MGDRun
from .network import NetworkConfig, NetworkResult, NetworkRun

#: Stable name -> type, for every type a store writes by name.
TYPES = {cls.__name__: cls for cls in (MGDRun, MGDConfig, MGDResult, FlowRun, AdaptiveFlowRun, FlowConfig,
                                        FlowResult,
                                        Trajectory, Problem, NetworkRun, NetworkConfig, NetworkResult,
                                        NetworkProblem)}

#: Run family (``run.family``, the ``family`` attribute of a store) -> run class. MGD and SMGD are
#: family "mgd"; MGF(λ) and gradient flow share "flow" (kinds "mgf", "gf", accepted as families too) on a
#: fixed grid, "flow-adaptive" with the adaptive scheme.
RUN_FAMILIES = {"mgd": MGDRun, "flow": FlowRun, "mgf": FlowRun, "gf": FlowRun, "flow-adaptive": AdaptiveFlowRun,
                "network": NetworkRun}

#: Module paths written by 0.2.0 -> stable names.
LEGACY_NAMES = {
    "dlnmomentum.mgd:MGDRun": "MGDRun", "dlnmomentum.mgd:MGDConfig": "MGDConfig",
    "dlnmomentum.mgd:MGDResult": "MGDResult", "dlnmomentum.flow:FlowRun": "FlowRun",
    "dlnmomentum.flow:FlowConfig": "FlowConfig", "dlnmomentum.flow:FlowResult": "FlowResult",
    "dlnmomentum.results:Trajectory": "Trajectory", "dlnmomentum.problem:Problem": "Problem",
}


class UnknownTypeError(ValueError):
    """A file names a type this version does not know."""


def type_name(obj_or_cls):
    """The stable name of a registered type (or of an instance's type)."""
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    name = cls.__name__
    if TYPES.get(name) is not cls:
        raise UnknownTypeError(f"type {cls.__module__}.{cls.__qualname__} is not registered in "
                               "dlnmomentum.runs.registry.TYPES; it cannot be written into a store")
    return name


def resolve(name, what="type"):
    """The class of a stable name (or of a 0.2.0 module path)."""
    name = LEGACY_NAMES.get(name, name)
    try:
        return TYPES[name]
    except KeyError:
        raise UnknownTypeError(f"unknown {what} {name!r} (known: {', '.join(sorted(TYPES))})") from None


def run_class(family):
    """The run class of a run family (``"mgd"``, ``"flow"``)."""
    try:
        return RUN_FAMILIES[family]
    except KeyError:
        raise UnknownTypeError(f"unknown run family {family!r} (known: {', '.join(sorted(RUN_FAMILIES))})") from None
