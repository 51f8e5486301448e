r"""Sweeps: many MGD / SMGD runs over a (β, γ) grid, or flows over a λ line, as one labelled grid.

Users call :func:`dlnmomentum.sweep` and :func:`dlnmomentum.resume_sweep` (:mod:`dlnmomentum.api`),
:func:`dlnmomentum.open_sweep` and :func:`dlnmomentum.parse_grid`. The package:

* :mod:`.grid` — grid text and validated coordinate arrays;
* :mod:`.plan` — the validated configuration and data sets of a sweep (:class:`~.plan.Plan`);
* :mod:`.lockstep`, :mod:`.flows` — the CPU engines (discrete points, flow points); :mod:`.cuda` — the GPU
  engine of discrete points (``device="cuda"``);
* :mod:`.execute` — waves of points through an engine into the store, :func:`~.execute.open_sweep`;
* :mod:`.distributed` — the same plan on a Dask cluster (``sweep(..., client=)``): blocks of points as
  tasks on the workers, this process the one writer of the store;
* :mod:`.result` — the labelled result :class:`~.result.Sweep`;
* :mod:`.networks`, :mod:`.network_lockstep` — sweeps of the small networks
  (:func:`dlnmomentum.networks_sweep`) and their CPU engine.

The per-point fields are defined once in :mod:`dlnmomentum.runs.points`, the file layout in
:mod:`dlnmomentum.store.sweep_format`.

Discrete time
-------------
A ``(β, γ)`` grid of MGD (or SMGD with ``batch_size``) runs of ``steps`` updates each,
over ``reps`` data sets, is advanced in lockstep by the compiled kernel
:func:`dlnmomentum.kernels.sweep._sweep_chunk` (eight runs per SIMD group, blocks of groups
in parallel). Every point is **bit for bit** the result of
``dlnmomentum.mgd(problem_r, γ, β, steps=steps, alpha=alpha, batch_size=batch_size,
replace=replace, seed=seed + r, tol=tol, gradient=gradient)``, whatever the thread count,
the block size or an interruption:

* rep ``r`` uses the data set ``sparse_regression(**spec, seed=seed + r)`` when a spec
  (a dict of :func:`~dlnmomentum.sparse_regression` arguments) is given, or the given
  :class:`~dlnmomentum.Problem` for every rep;
* SMGD batches of every grid point of rep ``r`` come from the seed ``seed + r`` (common
  random numbers across the grid: points differ by (β, γ) only).

Continuous time
---------------
``lams=[...]`` sweeps MGF(λ) (λ = 0 is gradient flow) up to ``t_max``: every point is
``dlnmomentum.mgf(problem_r, λ, t_max=t_max, alpha=alpha, tol=tol, gradient=gradient, scheme=scheme)``
(its own scheme, which ``"auto"`` chooses per λ, its own default step and start refinement), bit for bit.
The fixed-grid points (``"rk4"``, ``"exp-rk4"``) of a data set advance in lockstep groups of up to eight
(:func:`dlnmomentum.kernels.flow_sweep._flow_sweep_chunk`, groups in parallel): one step of every lane at
a time, each lane with its own step size, the gradients of all lanes of a stage in one register-blocked
product; points with similar numbers of steps share a group. The adaptive points (``"rodas"``, which
``"auto"`` takes for a ``tol`` or a long horizon) run one by one on threads (:mod:`.flows`).
``s_plus``/``s_minus`` are then the integrals :math:`I_\pm` of Theorem 1.

Fields
------
Indexed ``(rep, beta, gamma)`` (or ``(rep, beta, lam)`` for ``lams=`` with ``betas=``, ``(rep, pair)`` for
``pairs=``, ``(rep, lam)`` for a flow sweep); vectors add a trailing ``coord`` axis. The main ones (every field,
from the one table :mod:`dlnmomentum.runs.points`: ``docs/science.md``, "Sweep fields"):

=========================  =====================================================================
``test_loss``              test loss of the final θ
``train_loss``             train loss of the final θ
``delta_inf_norm``         ‖Δ∞‖₂, Δ∞ = |w₊w₋| at the end of the run
``l1_norm``                ‖θ‖₁
``crossed``                1 if some coordinate of w₊ or w₋ changed sign, else 0
``status``                 :class:`dlnmomentum.Status` code  (converged / max_steps / diverged)
``steps_done``             updates (integration steps for flows) done
``lam``                    λ = γ/(1-β)² (Proposition 1)
``s_plus``, ``s_minus``    the sums S± of Lemma 4 (I± for flows), ``coord`` vectors
``theta``                  final θ, ``coord`` vector
``prediction_gap``         Theorem 2: ‖θ - argmin D_ψΔ∞(·, θ̃₀)‖/‖·‖ (``theory=True``)
``normalized_distance``    ‖θ - θ^GF_Δ∞‖/‖θ^GF_Δ∞‖ (``theory=True``)
=========================  =====================================================================

The theory fields need a Newton solve per point: they are computed only with
``theory=True`` and only for converged points: status ``converged`` (``tol`` reached) or a
final train loss ``<= theory_tol`` (NaN elsewhere).

Store
-----
One HDF5 file (root attribute ``kind = "sweep"``, configuration JSON in ``config``):
dimension scales ``rep``, ``beta``, ``gamma`` (or ``lam``) and ``coord``, a dataset per field,
a ``done`` mask and a ``session`` number per point (which run of the sweep computed it).
Points are written in waves of whole blocks as they complete (the file is opened only for
those writes); an interrupted sweep (Ctrl-C, SIGTERM, or a killed process) resumes with
``sweep(..., store=path, resume=True)`` / :func:`resume_sweep` / ``dlnm sweep --resume`` and
computes only the points not yet marked done. The file opens in xarray
(``xarray.open_dataset(path, engine="h5netcdf")``).
"""
