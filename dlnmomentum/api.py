"""The API layer: the functions users call to run things.

Each builds a validated run (:mod:`dlnmomentum.runs`) or sweep plan (:mod:`dlnmomentum.sweeps`)
and hands it to the executor that fits: the chunked driver (:func:`dlnmomentum.driver.drive`)
for a run in memory, the store writer (:func:`dlnmomentum.store.run_with_store`, which wraps
the driver as a sink) for a stored run, the wave executor for a sweep. Nothing below this
layer imports it; the command line (:mod:`dlnmomentum.cli`) sits above it.
"""

import os

from .driver import drive
from .networks import NetworkProblem
from .progress import check as check_progress
from .runs.common import DEFAULT_ALPHA, auto_progress, work_flops
from .runs.flow_adaptive import prepare_flow_run
from .runs.flow_from_mgd import prepare_mgf_from_mgd
from .runs.mgd import prepare_mgd
from .runs.network import prepare_network
from .runs.stepping import DEFAULT_MAX_CROSSINGS
from .store import run_with_store
from .store.files import StoreError, StoreExistsError, real_path
from .store.kinds import (
    repair_left_open,
    require_overwritable,
    require_regular_or_absent,
    resume_or_overwrite,
)
from .store.sweep_format import SweepFile
from .store.sweep_format import lock as sweep_lock
from .sweeps.distributed import executor_for
from .sweeps.execute import block_size_of, check_device, run_plan, store_path
from .sweeps.networks import is_network_sweep, resume_networks_sweep
from .sweeps.networks import networks_sweep as _networks_sweep
from .sweeps.plan import DEFAULT_THEORY_TOL, Plan, config_differences, resume_hint
from .sweeps.plan import make_config as make_sweep_config
from .validate import ParameterValueError, as_bool, as_float, as_int, check_log

__all__ = ["gf", "mgd", "mgf", "mgf_from_mgd", "networks_sweep", "resume_sweep", "sweep"]


def _check_output(store, overwrite, checkpoint_every):
    """The store arguments of a run, checked before the run is prepared (which compiles or loads kernels: a store
    in a missing directory was refused only after that work)."""
    # (checked with or without a store: a nonsense value is refused, not ignored because no store was given)
    as_float("checkpoint_every", checkpoint_every, low=0.0)
    as_bool("overwrite", overwrite)
    if store is not None:
        store_path(store)


def _execute(run, progress, store, overwrite, checkpoint_every):
    """Drive ``run`` in memory, or through a store when ``store`` is given; returns its result."""
    progress = auto_progress(progress, work_flops(run))
    if store is not None:
        return run_with_store(run, store, overwrite=overwrite, checkpoint_every=checkpoint_every,
                              progress=progress)
    status, blocks = drive(run, progress=progress, desc=run.kind)
    return run.finish(status, blocks)


# -- discrete time -----------------------------------------------------------------------------------

def mgd(problem, gamma, beta, *, steps, alpha=None, u0=None, v0=None, batch_size=None, replace=False,
        seed=0, tol=None, record=None, progress=None, gradient="auto", store=None, overwrite=False,
        checkpoint_every=60.0, w0=None, record_params=False):
    r"""Run heavy-ball MGD (or SMGD) on a 2-layer diagonal linear network (or on a network problem).

    .. math::
        w_{k+1} = w_k - \gamma\nabla F_{B_k}(w_k) + \beta(w_k - w_{k-1}),\quad w_1 = w_0,

    with ``w = (u, v)``, ``F(w) = L(u ⊙ v)`` (paper, eq. (MGD), eq. (SMGD:diag)).

    Parameters
    ----------
    problem : Problem
    gamma : float
        Step size γ > 0.
    beta : float
        Momentum β in [0, 1).
    steps : int
        Number of updates (``steps=k`` ends at :math:`w_{k+1}`, like ``k`` calls of
        ``torch.optim.SGD(lr=γ, momentum=β).step()``).
    alpha : float
        Initialisation scale of the default ``u0 = α·1, v0 = 0``, in [1e-150, 1e150) (default 0.01).
    u0, v0 : arrays (d,), optional
        Any initialisation with ``|u0_i| != |v0_i|``.
    batch_size : int, optional
        SMGD batch size B in [1, n]; ``None`` (or ``n`` without replacement) is full batch.
    replace : bool
        Sample each batch with replacement (default: B distinct samples).
    seed : int
        Seed of the explicit batch-sampling state (xoshiro256**), in [0, 2**63 - 1].
    tol : float, optional
        Stop at the first iterate whose train loss is ``<= tol`` (``tol >= 0``; status ``converged``).
    record : Record, optional
        Schedule of recorded iterates (θ, w₊, w₋, Δ, train and test loss).
    progress : bool or "log", optional
        A tqdm bar (True), none (False), or a line on stderr every few seconds (``"log"``: batch jobs, log
        files). Default None: a bar for runs estimated to take over ten seconds, on a terminal or in Jupyter
        (:mod:`dlnmomentum.progress`).
    gradient : {"auto", "hessian", "data"}
        Full-batch gradient form; ``auto`` picks the cheaper of ``Hθ - b`` (d²) and
        ``Xᵀ(Xθ - y)/n`` (2nd). In the data form (and with ``batch_size``) the d × d matrix H = XᵀX/n is never
        formed nor stored, so wide data (d = 1e5, n = 10: H would be 80 GB) runs from X alone.
    store : str or path, optional
        Stream the run to this HDF5 file (see :mod:`dlnmomentum.store.writer`).
    overwrite : bool
        Allow replacing an existing ``store``.
    checkpoint_every : float
        Seconds of wall clock between checkpoints of a stored run.

    w0 : array (n_params,), optional
        Network problems only: initial parameters (default ``problem.params0``).
    record_params : bool
        Network problems only: also record the flat parameters (``trajectory.extra["params"]``).

    Returns
    -------
    MGDResult
        Status ``max_steps``, ``converged``, ``diverged`` or ``interrupted``. For a
        :class:`~dlnmomentum.NetworkProblem` (:func:`~dlnmomentum.teacher_student`,
        :func:`~dlnmomentum.deep_linear`) the same heavy ball runs on the network's flat
        parameters (:mod:`dlnmomentum.runs.network`) and the result is a ``NetworkResult``;
        ``alpha``, ``u0``, ``v0`` and ``gradient`` do not apply there.
    """
    _check_output(store, overwrite, checkpoint_every)
    if isinstance(problem, NetworkProblem):
        # (alpha's default is None so that a given alpha is refused here, not ignored; 0.01 on the diagonal path)
        if alpha is not None or u0 is not None or v0 is not None or gradient != "auto":
            raise ValueError("alpha, u0, v0 and gradient are for diagonal networks; a NetworkProblem takes w0")
        run = prepare_network(problem, gamma, beta, steps=steps, w0=w0, batch_size=batch_size, replace=replace,
                              seed=seed, tol=tol, record=record, record_params=record_params)
        return _execute(run, progress, store, overwrite, checkpoint_every)
    if w0 is not None or record_params:
        raise ValueError("w0 and record_params are for network problems (dlnmomentum.NetworkProblem)")
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    run = prepare_mgd(problem, gamma, beta, steps=steps, alpha=alpha, u0=u0, v0=v0, batch_size=batch_size,
                      replace=replace, seed=seed, tol=tol, record=record, gradient=gradient)
    return _execute(run, progress, store, overwrite, checkpoint_every)


# -- continuous time ---------------------------------------------------------------------------------

def mgf(problem, lam, *, t_max, h=None, alpha=0.01, u0=None, v0=None, u_dot0=None, v_dot0=None, tol=None,
        record=None, progress=None, gradient="auto", refine_start="auto", max_crossings=DEFAULT_MAX_CROSSINGS,
        store=None, overwrite=False, checkpoint_every=60.0, scheme="auto", rtol=None, atol=None, max_steps=None):
    r"""Integrate momentum gradient flow MGF(λ) on a 2-layer diagonal linear network.

    .. math::
        \lambda\ddot w_\pm + \dot w_\pm \pm \nabla L(\theta)\odot w_\pm = 0,\qquad
        \theta = (w_+^2 - w_-^2)/4 = u\odot v

    (paper, eq. (MGF:diag); Appendix B, eq. (w_mgf)), together with the integrals
    :math:`J_\pm, K_\pm, P, Q, G_2` and every sign crossing of :math:`w_\pm` (see the module
    docstring).

    Parameters
    ----------
    problem : Problem
    lam : float
        λ ≥ 0; ``lam = 0`` is gradient flow (:func:`gf`).
    t_max : float
        End time > 0.
    h : float, optional
        Grid step; rounded down so that ``t_max`` is a whole number of steps. Must lie in
        the RK4 stability region (:func:`max_stable_step` for :func:`stiffness_estimate`).
        Default: :func:`default_step`.
    alpha : float
        Initialisation scale of the default ``u0 = α·1``, ``v0 = 0``.
    u0, v0 : arrays (d,), optional
        Any initialisation with ``|u0_i| != |v0_i|``, entries in (-1e150, 1e150).
    u_dot0, v_dot0 : arrays (d,), optional
        Initial velocity (default zero, as in the paper), entries in (-1e150, 1e150).
    tol : float, optional
        Stop at the first grid point whose train loss is ``<= tol`` (status ``converged``).
    record : Record, optional
        Recorded grid points (``every``/``times`` in time units; ``"rodas"``, ``"ndf"``: points of the dense output at
        those times (inside a step of MGF's explicit start: of a DOP853 step from the step's start), or
        ``Record(accepted=True)``: the initial point and every accepted step); rows carry θ,
        w₊, w₋, Δ, the losses and, in ``trajectory.extra``, the velocities ``w_plus_dot``/``w_minus_dot``.
    progress : bool or "log", optional
        A tqdm bar (True), none (False), or a line on stderr every few seconds (``"log"``: batch jobs, log
        files). Default None: a bar for runs estimated to take over ten seconds, on a terminal or in Jupyter
        (:mod:`dlnmomentum.progress`).
    gradient : {"auto", "hessian", "data"}
        Gradient form, as in :func:`dlnmomentum.mgd`.
    refine_start : "auto", None or (float, int)
        ``(t, m)``: grid steps in ``[0, t)`` are made of ``m`` RK4 steps each.
    max_crossings : int
        Capacity of the crossing-time log.
    store, overwrite, checkpoint_every
        Stream the run to an HDF5 file (see :mod:`dlnmomentum.store`).
    scheme : {"auto", "rk4", "exp-rk4", "rodas", "ndf"}
        Stepper: classic RK4 on a fixed grid; the exponential RK4 of :mod:`dlnmomentum.kernels.flow_exp`
        (the fast mode -1/λ exactly, a step set by the gradient time scale, not by λ); ``"rodas"``,
        the adaptive Rosenbrock method Rodas5P of :mod:`dlnmomentum.kernels.flow_rodas` (L-stable,
        error-controlled steps that grow along the slow tail: a run to train loss 1e-20 at t ~ 3e5
        takes about a thousand steps instead of ~1.5e7; MGF starts by the explicit DOP853 while it is not stiff,
        :mod:`dlnmomentum.kernels.flow_dop853`); or, for gradient flow (λ = 0) only, ``"ndf"``, the
        adaptive variable-order NDF of :mod:`dlnmomentum.kernels.flow_ndf` (about two thousand cheap steps to
        the same limit, about twice as fast as ``"rodas"`` there). ``"auto"`` takes an adaptive scheme (``"ndf"``
        for λ = 0, ``"rodas"`` for λ > 0) for a ``tol`` stopping rule or a long horizon, else the cheaper
        fixed-grid scheme (:func:`dlnmomentum.runs.stepping.choose_flow_scheme`). ``result.config.scheme`` is the
        one used.
    rtol, atol : float, optional
        Tolerances of the adaptive schemes: ``rtol`` in [1e-15, 1e-2], ``atol`` in [1e-300, 1]. Defaults:
        ``"rodas"`` 1e-9 and 1e-11 (MGF on the paper's problem: θ at the limit within 7e-12 of a tight
        reference, along the way within 3e-10; for MGF the default ``atol`` is scaled down in proportion to the smallest
        initial |w±| below 0.01, :func:`dlnmomentum.runs.stepping.default_atol`), ``"ndf"`` 1e-11 and 1e-13
        (a multistep method's error is larger at the same tolerances: at the limit within 4e-13, along the way
        within 6e-10); docs/guide/flows.md, "Schemes".
    max_steps : int, optional
        Budget of accepted adaptive steps, in [1, 2**62] (default 1e8; status ``max_steps`` when spent).

    Returns
    -------
    FlowResult
        Status ``max_steps``, ``converged``, ``diverged`` or ``interrupted``; with an adaptive scheme also
        ``stalled`` (a ``tol`` below the train loss's float64 rounding floor: docs/guide/flows.md).
    """
    _check_output(store, overwrite, checkpoint_every)
    run = prepare_flow_run(problem, lam, t_max=t_max, h=h, alpha=alpha, u0=u0, v0=v0, u_dot0=u_dot0,
                           v_dot0=v_dot0, tol=tol, record=record, gradient=gradient, refine_start=refine_start,
                           max_crossings=max_crossings, scheme=scheme, rtol=rtol, atol=atol, max_steps=max_steps)
    return _execute(run, progress, store, overwrite, checkpoint_every)


def gf(problem, *, t_max, h=None, alpha=0.01, u0=None, v0=None, tol=None, record=None, progress=None,
       gradient="auto", refine_start="auto", max_crossings=DEFAULT_MAX_CROSSINGS, store=None, overwrite=False,
       checkpoint_every=60.0, scheme="auto", rtol=None, atol=None, max_steps=None):
    r"""Integrate gradient flow :math:`\dot w_\pm = \mp\nabla L(\theta)\odot w_\pm` (MGF with λ = 0).

    Same arguments and result as :func:`mgf` (no initial velocity). Δ_t = Δ_0 along the exact
    flow; ``J± = G₂ = ∫∇L²``, ``K = Q = 0`` and ``I± = 0``. ``scheme`` is ``"auto"``, ``"rk4"``, ``"rodas"``
    or ``"ndf"`` (``"auto"`` takes ``"ndf"`` for a long horizon; gradient flow has no fast mode for the exponential
    scheme).
    """
    _check_output(store, overwrite, checkpoint_every)
    run = prepare_flow_run(problem, 0.0, t_max=t_max, h=h, alpha=alpha, u0=u0, v0=v0, tol=tol, record=record,
                           gradient=gradient, refine_start=refine_start, max_crossings=max_crossings, scheme=scheme,
                           rtol=rtol, atol=atol, max_steps=max_steps)
    return _execute(run, progress, store, overwrite, checkpoint_every)


def mgf_from_mgd(problem, gamma, beta, *, steps, substeps=None, alpha=0.01, u0=None, v0=None, u1=None,
                 v1=None, tol=None, record=None, progress=None, gradient="auto", refine_start="auto",
                 max_crossings=DEFAULT_MAX_CROSSINGS, store=None, overwrite=False, checkpoint_every=60.0,
                 scheme="auto"):
    r"""The MGF(λ) run that MGD(γ, β) discretises (Proposition 1), up to the time of MGD step ``steps``.

    λ = γ/(1-β)², ε = γ/(1-β), ``t_max = steps·ε`` (:func:`mgd_time`); the initial velocity is
    :math:`(w_1 - w_0)/\sqrt{\lambda\gamma}` with ``(u1, v1)`` the second MGD point (default
    ``w_1 = w_0``, as in :func:`dlnmomentum.mgd`, hence zero velocity). The grid step is
    ``ε/substeps`` (default: the smallest whole number of substeps giving a step below
    :func:`default_step` of the scheme), so MGD step ``k`` is grid step ``k·substeps``; ``record`` is
    given in MGD steps. ``scheme`` is ``"auto"``, ``"rk4"`` or ``"exp-rk4"``, as in :func:`mgf` but always on
    that grid (``"auto"``: the exponential RK4 where λ is small against the problem's time scale, else RK4; never
    the adaptive ``"rodas"`` or ``"ndf"``, which have no grid).
    """
    _check_output(store, overwrite, checkpoint_every)
    run = prepare_mgf_from_mgd(problem, gamma, beta, steps=steps, substeps=substeps, alpha=alpha, u0=u0, v0=v0,
                               u1=u1, v1=v1, tol=tol, record=record, gradient=gradient,
                               refine_start=refine_start, max_crossings=max_crossings, scheme=scheme)
    return _execute(run, progress, store, overwrite, checkpoint_every)


# -- sweeps --------------------------------------------------------------------------------------------

def sweep(problem_or_spec, *, gammas=None, betas=None, lams=None, pairs=None, steps=None, t_max=None, reps=1,
          batch_size=None, seed=0, store=None, tol=None, progress=None, alpha=None, replace=False,
          gradient="auto", block_size=None, theory=False, theory_tol=None, resume=False, overwrite=False,
          log=None, wave_size=None, device="cpu", client=None, scheme="auto", rtol=None, atol=None, max_steps=None):
    r"""Run MGD/SMGD over a (β, γ) grid, constant-λ lines or (γ, β) pairs, or MGF(λ) over a λ line.

    Designs (:mod:`dlnmomentum.sweeps.plan`): ``gammas`` and ``betas`` — a (β, γ) grid; ``lams`` and
    ``betas`` with ``steps`` — MGD on constant-λ lines, γ = λ(1-β)² (dims ``(rep, beta, lam)``);
    ``pairs=[(γ, β), ...]`` — a list of MGD points (dims ``(rep, pair)``); ``lams`` with ``t_max`` —
    MGF(λ) on a λ line. Every point's ``lam`` is a field of the result, and so are ``gamma`` and ``beta``
    where they are not dims (a dim's values are ``coords[name]``).

    Parameters
    ----------
    problem_or_spec : Problem or dict
        A :class:`~dlnmomentum.Problem` (the same data for every rep) or a dict of
        :func:`~dlnmomentum.sparse_regression` arguments (``n, d, s, mu, sigma, n_test``):
        rep ``r`` is generated with seed ``seed + r``. A :class:`~dlnmomentum.NetworkProblem`
        or a dict with a ``generator`` key runs :func:`networks_sweep` instead.
    gammas, betas : sequence of float or str
        Step sizes γ > 0 and momenta β in [0, 1) of a discrete sweep (strings as in
        :func:`parse_grid`, e.g. ``"1e-3:1e-1:20:log"``).
    lams : sequence of float or str
        λ ≥ 0 of a flow sweep (λ = 0: gradient flow); with ``betas``, λ > 0 of MGD's constant-λ lines.
    pairs : sequence of (float, float)
        (γ, β) of each MGD point (γ > 0, β in [0, 1)).
    steps : int
        Updates per discrete run (as ``steps`` of :func:`dlnmomentum.mgd`).
    t_max : float
        End time of every flow.
    reps : int
        Number of data replications.
    batch_size : int, optional
        SMGD batch size (``None``: full batch), as in :func:`dlnmomentum.mgd`.
    seed : int
        Data seed of rep 0 (rep r: ``seed + r``) and the batch seed of every point of rep r.
    store : path, optional
        Stream the sweep to this HDF5 file (see the module docstring).
    tol : float, optional
        Stop a run at the first iterate whose train loss is ``<= tol``.
    progress : bool or "log", optional
        A tqdm bar over run-steps with an ETA (True), none (False), or a line on stderr every few seconds
        (``"log"``). Default None: a bar for sweeps estimated to take over ten seconds, on a terminal or in
        Jupyter (:mod:`dlnmomentum.progress`).
    alpha : float
        Initialisation ``u0 = α·1``, ``v0 = 0`` (default 0.01).
    replace : bool
        SMGD batches with replacement.
    gradient : {"auto", "hessian", "data"}
        Full-batch gradient form, as in :func:`dlnmomentum.mgd`.
    block_size : int, optional
        Runs per parallel block (a multiple of 8, the lanes of a SIMD group; default 8). Never changes a result bit.
    theory : bool
        Also compute ``prediction_gap`` and ``normalized_distance`` (a Newton solve per point).
    theory_tol : float, optional
        Theory fields only for converged points: status ``converged``, or a final train loss
        ``<= theory_tol`` (runs without ``tol``). Default 1e-8.
    resume : bool
        Continue an existing ``store`` with the same configuration (only missing points run).
    overwrite : bool
        Replace an existing ``store``.
    log : callable, optional
        Called with a line of text after every written wave.
    wave_size : int, optional
        Points per wave (rounded up to whole blocks); a wave's points are written together.
        Default: about ``WAVE_SECONDS`` (20 s) of work.
    device : {"cpu", "cuda"}
        ``cpu``: the lockstep SIMD engine on all cores; ``cuda``: one warp per run on an NVIDIA GPU
        (discrete sweeps; needs numba-cuda, ``pip install ".[cuda]"``). Every point agrees with the
        CPU engine (see ``benchmarks/README.md`` for the measured agreement).
    client : dask.distributed.Client, optional
        Run the points on a Dask cluster (:mod:`dlnmomentum.sweeps.distributed`): blocks of points
        become tasks on the workers (each with ``device``'s engine), this process writes the store;
        same result, bit for bit. ``wave_size`` is then the points per task (default: about 8 tasks
        per worker). Needs the ``distributed`` extra.
    scheme : {"auto", "rk4", "exp-rk4", "rodas", "ndf"}
        Stepper of a flow sweep, as in :func:`mgf`; with ``"auto"`` every λ gets its own choice
        (every point equals ``mgf(problem, lam, ..., scheme=scheme)``). Fixed-grid points advance in
        lockstep groups; adaptive points (``"rodas"``, and ``"ndf"`` at λ = 0, which ``"auto"`` takes for a ``tol``
        or a long horizon) take steps of their own sizes and run one by one on threads. ``"ndf"`` is for a line
        of λ = 0 only.
    rtol, atol, max_steps : optional
        Tolerances and budget of accepted steps of a flow sweep's adaptive points, with :func:`mgf`'s ranges and
        defaults: every point equals ``mgf(problem, lam, ..., scheme=scheme, rtol=rtol, atol=atol,
        max_steps=max_steps)``, so a value given makes ``"auto"`` take the adaptive scheme at every λ, and a
        grid ``scheme`` (``"rk4"``, ``"exp-rk4"``) or a discrete sweep refuses them. The store keeps them (None:
        the defaults) and :func:`resume_sweep` continues with them; ``resume=True`` with other values is refused.

    Returns
    -------
    Sweep
        ``complete`` is False when the sweep was interrupted (Ctrl-C / SIGTERM); the points
        done so far are in the store.
    """
    if isinstance(problem_or_spec, NetworkProblem) or (isinstance(problem_or_spec, dict)
                                                       and "generator" in problem_or_spec):
        # a network problem or spec: the network sweep engine (same Sweep, its own store)
        if (lams is not None or t_max is not None or theory or theory_tol is not None or gradient != "auto"
                or device != "cpu" or client is not None or scheme != "auto" or alpha is not None
                or block_size is not None or pairs is not None or rtol is not None or atol is not None
                or max_steps is not None):
            raise ValueError("a network sweep takes gammas, betas and steps (no lams, t_max, pairs, theory, "
                             "theory_tol, gradient, alpha, block_size, device, client, scheme, rtol, atol or "
                             "max_steps); see dlnmomentum.networks_sweep")
        return networks_sweep(problem_or_spec, gammas=gammas, betas=betas, steps=steps, reps=reps, seed=seed,
                              tol=tol, batch_size=batch_size, replace=replace, store=store, resume=resume,
                              overwrite=overwrite, wave_size=wave_size, log=log, progress=progress)
    check_progress(progress)  # before any work
    check_log(log)
    resume, overwrite = resume_or_overwrite(resume, overwrite)
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    theory_tol = DEFAULT_THEORY_TOL if theory_tol is None else theory_tol
    config, problem = make_sweep_config(problem_or_spec, gammas, betas, lams, steps, t_max, reps, batch_size,
                                        seed, tol, alpha, replace, gradient, theory, theory_tol, scheme,
                                        pairs=pairs, rtol=rtol, atol=atol, max_steps=max_steps)
    block_size = block_size_of(block_size)
    wave_size = as_int("wave_size", wave_size, low=1, allow_none=True)
    plan = Plan(config, problem)
    executor = executor_for(client)
    check_device(device, plan, here=client is None)
    if store is None:
        if resume:
            raise ParameterValueError("resume=True needs a store", "resume=", "store")
        return run_plan(plan, None, progress, block_size, log, wave_size, device, executor)
    path = real_path(store_path(store))  # through a symlink: the file it leads to is locked and written
    if overwrite:
        require_regular_or_absent(path, "sweep")  # a device, FIFO, ...: refused before a lock file is made
    lock = sweep_lock(path)
    try:
        sw = SweepFile(path)
        if os.path.exists(path):
            if overwrite:
                require_overwritable(path, "sweep")  # only a sweep store that this package wrote is replaced
                os.remove(path)
            elif resume:
                repair_left_open(path, "sweep")  # (a writer killed while it wrote a wave left HDF5's "open" flags)
                stored, _ = sw.read_config(action="resume")
                diff = config_differences(stored, config)
                if diff:
                    raise StoreError(f"sweep store {path} was created with a different configuration "
                                     f"(differs in {', '.join(diff)}); use another store or overwrite=True"
                                     + resume_hint(stored, diff))
            else:
                # (the command line's options too, as a run store's message names them)
                raise StoreExistsError(f"sweep store {path} exists; pass resume=True (--resume) to continue "
                                       "it or overwrite=True (--overwrite) to replace it")
        if not os.path.exists(path):
            sw.create(plan)
        return run_plan(plan, sw, progress, block_size, log, wave_size, device, executor)
    finally:
        lock.release()


def repair_left_open_sweep(path):
    """A sweep or network sweep store whose writer was killed while it wrote a wave (outside SWMR mode) has HDF5's
    "open for writing" flags set, which every reader refuses: cleared under the writer lock once the file is known
    to be one of the two; another file is refused as it is (its flags left)."""
    lock = sweep_lock(path)
    try:
        repair_left_open(path, ("sweep", "network-sweep"))
    finally:
        lock.release()


def resume_sweep(path, *, progress=None, block_size=None, log=None, wave_size=None, device="cpu", client=None):
    """Continue the sweep stored at ``path`` with its stored configuration (only missing points run): a flow sweep
    with its ``scheme``, ``rtol``, ``atol`` and ``max_steps`` (a store written before 0.6.0 has none of the last
    three: its points ran, and run on, with the defaults).

    ``device`` and ``client`` as in :func:`sweep`: a sweep may be continued on another device, or on a
    Dask cluster, than it started on.
    """
    check_progress(progress)
    check_log(log)
    path = real_path(store_path(path))  # through a symlink: the file it leads to is locked and written
    if not os.path.exists(path):
        raise FileNotFoundError(f"sweep store {path} does not exist")
    repair_left_open_sweep(path)
    executor = executor_for(client)
    if is_network_sweep(path):
        if client is not None:
            raise ValueError("client: network sweeps run on one machine (dlnmomentum.networks_sweep)")
        return resume_networks_sweep(path, wave_size=wave_size, log=log, progress=progress)
    block_size = block_size_of(block_size)
    wave_size = as_int("wave_size", wave_size, low=1, allow_none=True)
    lock = sweep_lock(path)
    try:
        sw = SweepFile(path)
        config, problem = sw.read_config(action="resume")
        config.pop("sessions", None)
        plan = Plan(config, problem)
        check_device(device, plan, here=client is None)
        return run_plan(plan, sw, progress, block_size, log, wave_size, device, executor)
    finally:
        lock.release()


def networks_sweep(problem_or_spec, *, gammas, betas, steps, reps=1, seed=0, tol=None, batch_size=None,
                   replace=False, store=None, resume=False, overwrite=False, threads=None, wave_size=None, log=None,
                   progress=None):
    r"""MGD/SMGD on a network problem over a (β, γ) grid, for ``reps`` data sets.

    Every point is ``mgd(problem_r, γ, β, steps=steps, batch_size=batch_size, replace=replace,
    seed=seed + r, tol=tol)`` bit for bit: the points of a wave advance together, one compiled call per
    chunk of ~0.25 s, in parallel over points (:mod:`dlnmomentum.sweeps.network_lockstep`), each with the
    single run's own update.

    Parameters
    ----------
    problem_or_spec : NetworkProblem or dict
        One :class:`~dlnmomentum.NetworkProblem` for every rep, or a dict
        ``{"generator": "teacher_student" | "deep_linear", **arguments}`` (no ``seed``): rep ``r``
        is generated with ``seed + r`` (data and initialisation).
    gammas, betas : sequence of float or str
        γ > 0 and β in [0, 1) (strings as in :func:`parse_grid`).
    steps : int
        Updates per run.
    reps, seed, tol, batch_size, replace
        As in :func:`sweep` and :func:`mgd` (``tol``: stop at train loss ``<= tol``).
    store : path, optional
        An HDF5 network sweep store (:mod:`dlnmomentum.store.network_sweep`); points are written as
        they end (after the chunk in which they end).
    resume, overwrite : bool
        Continue an existing store with the same configuration / replace it.
    threads : int, optional
        Numba threads, i.e. points advanced at once (default and at most: Numba's thread count, the
        CPU count unless ``NUMBA_NUM_THREADS`` says otherwise).
    wave_size : int, optional
        Points advanced together (default: every pending point, up to 64 MiB of per-point state, at
        least ``4·threads``); Ctrl-C/SIGTERM are checked after every chunk (an interrupted wave keeps
        the points that ended; the others run again on resume).
    log : callable, optional
        Called with a line of text after every chunk in which points ended.
    progress : bool or "log", optional
        As in :func:`sweep`: a bar over run-steps (True), none (False), a line on stderr every few seconds
        (``"log"``); default None: a bar for sweeps estimated over ten seconds, on a terminal or in Jupyter.

    Returns
    -------
    Sweep
        dims ``(rep, beta, gamma)``, fields ``test_loss``, ``train_loss``, ``param_norm``, ``status``,
        ``steps_done``, ``lam``; ``interrupted`` True after Ctrl-C/SIGTERM.
    """
    return _networks_sweep(problem_or_spec, gammas=gammas, betas=betas, steps=steps, reps=reps, seed=seed, tol=tol,
                           batch_size=batch_size, replace=replace, store_path=store, resume=resume,
                           overwrite=overwrite, threads=threads, wave_size=wave_size, log=log, progress=progress)
