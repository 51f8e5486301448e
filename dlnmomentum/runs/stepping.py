r"""Step-size policy of the flows: the grid schemes' stability regions, stiffness estimate, default step and
refined start; the scheme names, the adaptive scheme's default tolerances and the ``"auto"`` choice.

The stepper (:mod:`dlnmomentum.kernels.flow`) takes whatever fixed step it is given; this
module decides that step (the controller, in diffrax's terms), so a new stepping scheme
adds its own stability region here and leaves the run object alone.

Step size
---------
The RK4 stability region on the negative real axis is ``[-RK4_REAL_LIMIT, 0]``
(``RK4_REAL_LIMIT`` ≈ 2.785). The linearisation of MGF(λ) around a point has the modes
:math:`\lambda s^2 + s + \kappa = 0` for every stiffness κ in the spectrum of
:math:`\nabla^2 F` (in w-space): the fast damped mode :math:`s \approx -1/\lambda` (``h ≲ λ``)
and, for :math:`\kappa > 1/(4\lambda)`, oscillatory modes of modulus :math:`\sqrt{\kappa/\lambda}`
(``h ≲ √(λ/κ)``); gradient flow has :math:`s = -\kappa` (``h ≲ 1/κ``). At a point with
:math:`\nabla L = 0` the stiffness is the largest eigenvalue of :math:`S H S`,
:math:`S = \mathrm{diag}((4\theta^2 + \Delta^2)^{1/4})`, which depends on where the run goes:
:func:`stiffness_estimate` evaluates it at the initialisation and at the minimum-ℓ1 and
minimum-ℓ2 interpolators (with the initial balancedness), and takes the largest.

* A user-given ``h`` is rejected (``ValueError`` naming ``h`` and the allowed range) when it is
  outside the stability region for that estimate, :func:`max_stable_step`.
* The default ``h`` is :func:`default_step`: with the transient stiffness
  ``κ' = TRANSIENT_FACTOR·κ`` (momentum overshoots; transients reach about twice the limit's
  ``w²``), ``min(max_stable_step(λ, κ')/4, 0.4/κ')``. On the paper's problem this keeps θ
  within about 1e-10 of a DOP853 (rtol 1e-12) solution for λ up to 3 and for gradient flow.
* Most of the integration error of a run from a small initialisation is made while the
  weights escape from it (the first few time units). ``refine_start=(t, m)`` integrates the
  grid steps in ``[0, t)`` with ``m`` RK4 steps each, on the same output grid. The default
  ``"auto"`` uses ``m = 8`` up to ``3·τ + 5λ``, where τ is the escape time of the fastest
  coordinate from :math:`|w_0|^2` to the scale of the interpolators; ``None`` disables it.
  Every step is still a classic RK4 step of a fixed size.

A run also monitors the largest :math:`w^2` it visits and warns (``RuntimeWarning``) when the
final point's linearisation is outside the stability region of the step used.

The exponential scheme (``scheme="exp-rk4"``)
---------------------------------------------
:mod:`dlnmomentum.kernels.flow_exp` integrates the fast mode -1/λ exactly, so its step is set
by the gradient-flow time scale 1/κ, not by λ. Its stability region is that of its
amplification matrix on the linearisation :math:`\lambda\ddot w + \dot w + \kappa' w = 0`
(:func:`exp_amplification`, the scheme's own coefficients applied to that 2x2 system):
spectral radius at most 1 for every :math:`\kappa' \in [0, \kappa]`. As λ → 0 it tends to
the underlying five-stage Runge-Kutta method on :math:`-\kappa` (stable for
:math:`h\kappa \lesssim 3.2`). Its default step is :func:`default_step` with the same
fractions, i.e. ``0.4/κ'`` for small λ, the step of gradient flow.

Among the grid schemes, ``scheme="auto"`` (:func:`choose_scheme`) takes the exponential scheme when λ > 0 and
its default step is at least ``AUTO_STEP_RATIO`` times RK4's (it makes five gradient evaluations a step
against four, and more element-wise work), i.e. when λ is small against the time scale 1/κ;
otherwise classic RK4 (gradient flow, λ = 0, always). A flow's ``"auto"`` (:func:`choose_flow_scheme`) takes the
adaptive scheme ``"rodas"`` before that choice for a ``tol`` stopping rule or a grid of more than
``AUTO_ADAPTIVE_STEPS`` steps, unless a grid is asked for; ``DEFAULT_RTOL``, ``DEFAULT_ATOL`` and
:func:`default_atol` are that scheme's default tolerances.
"""

import functools
import hashlib
import math
import weakref

import numpy as np

from ..validate import MAX_STEPS, ParameterValueError, as_float, as_int

#: trajectories reaches about twice its limit value on the paper's problems).
TRANSIENT_FACTOR = 2.5
#: The default step is at most the stability limit (for the transient stiffness) divided by this ...
DEFAULT_STEP_FRACTION = 4.0
#: ... and at most this over the transient stiffness (the time scale of the stiffest direction).
DEFAULT_STEP_SCALE = 0.4
#: Substeps of the automatic start refinement.
AUTO_START_SUBSTEPS = 8
#: Capacity of the crossing-time log (first crossings kept; all are counted).
DEFAULT_MAX_CROSSINGS = 1000
#: A flow that needs more RK4 steps than this warns with the estimate (minutes of compute at d = 30).
LARGE_GRID = 10**7
#: The largest λ accepted: products of λ with the stiffness and with a run's integrals must stay finite in
#: float64 (and beyond it MGF(λ) hardly moves from its initialisation over any representable time).
LAM_MAX = 1e100
#: The smallest λ > 0 accepted: float64's smallest normal number. A subnormal λ is refused by name (before, at
#: λ = 5e-324 the default RK4 step 0.7λ underflowed to 0: a ZeroDivisionError in the ``auto`` choice; the exponential
#: RK4 never returned from its first chunk, deaf to Ctrl-C; Rodas reported a run "diverged" at step 0).
LAM_MIN = 2.2250738585072014e-308


def as_lam(name, lam):
    """``lam`` of a flow checked: 0 (gradient flow) or in [LAM_MIN, LAM_MAX]; the error names ``name``."""
    lam = as_float(name, lam, low=0.0, high=LAM_MAX)
    if 0.0 < lam < LAM_MIN:
        raise ParameterValueError(f"{name} must be 0 (gradient flow) or in [{LAM_MIN!r}, {LAM_MAX:g}] (a normal "
                                  f"float64: the step sizes of the schemes underflow below it), got {lam!r}", name)
    return lam


#: The stepping schemes of a flow (names stored in run stores) and the automatic choice: the fixed-grid
#: schemes, then the adaptive ones (:mod:`dlnmomentum.kernels.flow_rodas`; gradient flow only:
#: :mod:`dlnmomentum.kernels.flow_ndf`).
GRID_SCHEMES = ("rk4", "exp-rk4")
ADAPTIVE_SCHEMES = ("rodas", "ndf")
SCHEMES = GRID_SCHEMES + ADAPTIVE_SCHEMES
SCHEME_CHOICES = SCHEMES + ("auto",)
#: Default tolerances of ``"rodas"``: on the paper's problem θ at the limit (train loss 1e-20) within 6.6e-12 of
#: SciPy's Radau at rtol 1e-13 for λ in {1e-3, 0.05, 1} (SciPy's LSODA at rtol 1e-10: 4.1e-12-4.6e-12); along the
#: way (every 0.25 to t = 10, then to 2000) within 2.6e-10, 9.9e-11, 7.7e-11, the largest while the weights escape
#: from α = 0.01 (LSODA: 6.1e-10, 2.3e-10, 2.0e-10); rtol 3e-10 brings it under 1e-10 at all three (7.0e-11) with
#: about 1.3x the steps (``benchmarks/experiment_mgf_accuracy.py``, 2026-11-29; benchmarks/README.md, "Long
#: horizons"). tests/test_rodas.py checks 1e-10 against the fixed-step schemes at t = 2000 and 1e-9 at the limit.
DEFAULT_RTOL = 1e-9
DEFAULT_ATOL = 1e-11
#: Default rtol of the NDF (``"ndf"``, gradient flow), tighter than Rodas5P's: a multistep method's global error is
#: larger at the same tolerances. θ along the way (as above) within 5.5e-10 of SciPy's Radau at rtol 1e-13 on the
#: paper's problem, against 1.8e-9 for ``"rodas"`` at DEFAULT_RTOL and 2.0e-10 for SciPy's LSODA at rtol 1e-10 (met
#: at rtol 1e-12); at the limit within 3.1e-13 (``benchmarks/experiment_gf_multistep.py``, 2026-11-29).
DEFAULT_RTOL_NDF = 1e-11
DEFAULT_ATOL_NDF = 1e-13
#: The initial weight scale at which DEFAULT_ATOL holds; below it (MGF only) the default atol shrinks in
#: proportion (:func:`default_atol`).
DEFAULT_ATOL_SCALE = 0.01


def default_atol(lam, u0, v0):
    """The adaptive scheme's default ``atol`` for MGF(λ) from (u0, v0): DEFAULT_ATOL, scaled down in proportion to the
    smallest initial |w±| below DEFAULT_ATOL_SCALE.

    Why: MGF's w± rows are controlled against ``atol + rtol·|w|``, so a coordinate that is still tiny is followed
    to a relative accuracy only while |w| > atol/rtol; it decides when the coordinate grows (the early phase). At
    α = 1e-8 the absolute 1e-11 gave Δ∞ off by 3e-5 relative and θ by 7e-9, at α = 1e-16 by 20 %, and below
    α = 1e-40 a run never left the initialisation (measured against SciPy's Radau, 2026-11-27). Gradient flow (λ =
    0) runs in its mirror coordinate P, where an absolute error is a relative one in w: DEFAULT_ATOL as it is.
    """
    if not lam > 0.0:
        return DEFAULT_ATOL
    u0, v0 = np.asarray(u0, dtype=float), np.asarray(v0, dtype=float)
    scale = float(min(np.abs(u0 + v0).min(), np.abs(u0 - v0).min()))
    return DEFAULT_ATOL * min(1.0, scale / DEFAULT_ATOL_SCALE)
#: ``scheme="auto"`` takes the adaptive scheme for a ``tol`` stopping rule, or when the fixed grid would need
#: more than this many steps (a long horizon against the problem's fast time scale).
AUTO_ADAPTIVE_STEPS = 200_000
#: Default budget of accepted adaptive steps (a run to train loss 1e-20 takes about a thousand).
ADAPTIVE_MAX_STEPS = 10**8
#: ``scheme="auto"`` takes the exponential scheme when its default step is this many times RK4's.
AUTO_STEP_RATIO = 2.0


def rk4_amplification(z):
    """Amplification factor R(z) = 1 + z + z²/2 + z³/6 + z⁴/24 of classic RK4 on y' = s·y, z = h·s."""
    z = np.asarray(z)
    return 1.0 + z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z / 24.0)))


def _real_limit():
    # R(-x) = 1 at the end of the real stability interval; R(-x) - 1 = -x(1 - x/2 + x²/6 - x³/24)
    roots = np.roots([-1.0 / 24.0, 1.0 / 6.0, -0.5, 1.0])
    return float(min(r.real for r in roots if abs(r.imag) < 1e-12 and r.real > 0))


#: RK4 is stable on the negative real axis for h·|s| <= RK4_REAL_LIMIT (≈ 2.7853).
RK4_REAL_LIMIT = _real_limit()


def _stable(h, lam, kappa, samples=257):
    """Is |R(h s)| <= 1 for every mode s of the linearised flow with stiffness in [0, kappa]?"""
    tol = 1e-12
    if lam == 0.0:
        return h * kappa <= RK4_REAL_LIMIT
    if h / lam > RK4_REAL_LIMIT:  # the real segment [-1/λ, 0] (fast damped mode, K, Q)
        return False
    if 4.0 * lam * kappa <= 1.0:
        return True
    top = math.sqrt(4.0 * lam * kappa - 1.0) / (2.0 * lam)
    if not math.isfinite(top):  # 4λκ overflowed: the modulus of the oscillatory modes, sqrt(κ/λ)
        top = math.sqrt(kappa / lam)
    z = h * (-1.0 / (2.0 * lam) + 1j * np.linspace(0.0, top, samples))
    with np.errstate(over="ignore", invalid="ignore"):  # |R| overflowing is plainly unstable (NaN compares False)
        return bool(np.all(np.abs(rk4_amplification(z)) <= 1.0 + tol))


def max_stable_step(lam, kappa, scheme="rk4"):
    """Largest step of ``scheme`` stable for every linear mode of MGF(λ) (λ = 0: gradient flow) with
    stiffness ≤ κ.

    The modes are the roots of :math:`\\lambda s^2 + s + \\kappa' = 0`, :math:`0 \\le \\kappa' \\le \\kappa`
    (for λ = 0: :math:`s = -\\kappa'`); the step is found by bisection on the RK4
    amplification factor :func:`rk4_amplification` (relative precision 2⁻⁴⁵), or, for
    ``scheme="exp-rk4"`` (λ > 0), on the spectral radius of :func:`exp_amplification`.
    """
    scheme = check_scheme(scheme, resolved=True)
    if scheme in ADAPTIVE_SCHEMES:  # L-stable: no step limit from stability
        return math.inf
    if scheme == "exp-rk4" and float(lam) > 0.0:
        return _max_stable_step_exp(float(lam), max(float(kappa), 0.0))
    return _max_stable_step(float(lam), max(float(kappa), 0.0))


@functools.lru_cache(maxsize=256)
def _max_stable_step(lam, kappa):
    if lam == 0.0:
        return math.inf if kappa == 0.0 else RK4_REAL_LIMIT / kappa
    hi = RK4_REAL_LIMIT * lam
    if _stable(hi, lam, kappa):
        return hi
    lo = _bisect_stable(lam, kappa, hi)
    if lo == 0.0 and 4.0 * lam * kappa > 1.0:
        # The limit is far below the fast mode's (large λκ): bracket it by the oscillatory modes of modulus
        # sqrt(κ/λ), which no step beyond 3/sqrt(κ/λ) keeps in the RK4 region (its radius is below 3).
        lo = _bisect_stable(lam, kappa, 3.0 * math.sqrt(lam) / math.sqrt(kappa))
    return lo


def _bisect_stable(lam, kappa, hi):
    lo = 0.0
    for _ in range(45):
        mid = 0.5 * (lo + hi)
        if _stable(mid, lam, kappa):
            lo = mid
        else:
            hi = mid
    return lo


_INTERPOLATORS = weakref.WeakKeyDictionary()
#: :func:`stiffness_estimate` per problem: {digest of (u0, v0): κ}, at most ``_STIFFNESS_KEPT`` initialisations each.
_STIFFNESS = weakref.WeakKeyDictionary()
_STIFFNESS_KEPT = 64


def _interpolators(problem):
    """Minimum-ℓ2 and (when the LP succeeds) minimum-ℓ1 interpolators, cached per problem."""
    cached = _INTERPOLATORS.get(problem)
    if cached is None:
        from scipy.optimize import linprog

        X, y = problem.X, problem.y
        cached = [np.linalg.lstsq(X, y, rcond=None)[0]]
        d = problem.d
        res = linprog(np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=[(0, None)] * (2 * d),
                      method="highs")
        if res.status == 0:
            cached.append(res.x[:d] - res.x[d:])
        _INTERPOLATORS[problem] = cached
    return cached


def stiffness_at(hessian, theta, delta):
    """Largest eigenvalue of the w-space Hessian of F at a point with ∇L = 0: λmax(S H S)."""
    from scipy.linalg import eigh

    with np.errstate(over="ignore", invalid="ignore"):
        s = (4.0 * theta * theta + delta * delta) ** 0.25
        # Δ = 1e298 (alpha = 1e149, in alpha's range) overflowed in Δ² and handed scipy's eigh an inf ("array must
        # not contain infs or NaNs"): there sqrt(hypot(2θ, Δ)), the same value without squaring (elsewhere the
        # formula above, so every estimate that was finite keeps its bits); where S H S itself exceeds float64 the
        # estimate is inf, which the callers refuse by name (check_data_scale)
        s = np.where(np.isfinite(s), s, np.sqrt(np.hypot(2.0 * theta, delta)))
        M = hessian * s[:, None] * s[None, :]
    if not np.all(np.isfinite(M)):
        return math.inf
    d = M.shape[0]
    return float(eigh(M, eigvals_only=True, subset_by_index=[d - 1, d - 1])[0])


def stiffness_estimate(problem, u0, v0):
    r"""Stiffness κ of F = L(u ⊙ v) expected along a run from ``(u0, v0)`` (see the module docstring).

    The largest eigenvalue of :math:`S H S`, :math:`S = \mathrm{diag}((4\theta^2 + \Delta_0^2)^{1/4})`, at
    θ = u0 ⊙ v0 and at the minimum-ℓ1 and minimum-ℓ2 interpolators, :math:`\Delta_0 = |u_0^2 - v_0^2|`.
    """
    u0 = np.asarray(u0, dtype=float)
    v0 = np.asarray(v0, dtype=float)
    # kept per problem and initialisation: three eigenvalue problems cost about 1 ms at d = 30 (a 15 ms run spent 7%
    # of its call here), and a λ line or a loop over λ asks the same question again at every point
    digest = hashlib.blake2b(u0.tobytes(), digest_size=16)
    digest.update(v0.tobytes())
    key = (u0.shape, v0.shape, digest.digest())
    seen = _STIFFNESS.setdefault(problem, {})
    kappa = seen.get(key)
    if kappa is None:
        delta0 = np.abs(u0 * u0 - v0 * v0)
        H = problem.hessian
        kappa = stiffness_at(H, u0 * v0, delta0)
        for theta in _interpolators(problem):
            kappa = max(kappa, stiffness_at(H, theta, delta0))
        if len(seen) >= _STIFFNESS_KEPT:
            seen.clear()
        seen[key] = kappa
    return kappa


def default_step(lam, kappa, scheme="rk4"):
    """The default grid step of ``scheme`` for MGF(λ) (λ = 0: gradient flow) at stiffness estimate κ.

    ``min(max_stable_step(λ, κ') / DEFAULT_STEP_FRACTION, DEFAULT_STEP_SCALE / κ')`` with the
    transient stiffness ``κ' = TRANSIENT_FACTOR·κ``: a quarter of the stability limit (which is
    ≈ 2.79λ when the fast damped mode dominates, small λ) and at most 0.4 of the time scale 1/κ'
    (which is what keeps the weakly damped oscillations of larger λ accurate: the stability
    limit ≈ 2.6√(λ/κ') would leave them under-resolved). The exponential scheme has no
    limit from the fast mode: for small λ its step is ``0.4/κ'``, gradient flow's.
    """
    kappa = TRANSIENT_FACTOR * max(float(kappa), 0.0)
    h = max_stable_step(lam, kappa, scheme) / DEFAULT_STEP_FRACTION
    return min(h, DEFAULT_STEP_SCALE / kappa) if kappa > 0.0 else h


def check_scheme(scheme, resolved=False):
    """``scheme`` checked against :data:`SCHEME_CHOICES` (``resolved``: :data:`SCHEMES` only)."""
    allowed = SCHEMES if resolved else SCHEME_CHOICES
    if not isinstance(scheme, str) or scheme not in allowed:
        raise ValueError(f"scheme must be one of {', '.join(repr(a) for a in allowed)}, got {scheme!r}")
    return scheme


def choose_scheme(scheme, lam, kappa):
    """The scheme a run uses: ``scheme`` itself, or for ``"auto"`` the cheaper one (module docstring).

    ``"exp-rk4"`` needs λ > 0 (gradient flow has no fast mode to integrate exactly).
    """
    scheme = check_scheme(scheme)
    lam = float(lam)
    if scheme == "ndf" and lam > 0.0:
        raise ValueError(f"scheme 'ndf' is for gradient flow (lam = 0), got lam = {lam!r}: MGF(lambda)'s momentum "
                         "modes are oscillatory, where a BDF of order > 2 is not stable; use 'rodas' (adaptive) or "
                         "'auto'")
    if scheme == "exp-rk4" and not lam > 0.0:
        raise ValueError("scheme must be 'rk4', 'rodas', 'ndf' or 'auto' for gradient flow (lam = 0): the exponential "
                         "scheme integrates the fast mode -1/lambda of MGF(lambda), lambda > 0")
    if scheme != "auto":
        return scheme
    if not lam > 0.0:
        return "rk4"
    ratio = default_step(lam, kappa, "exp-rk4") / default_step(lam, kappa, "rk4")
    return "exp-rk4" if ratio >= AUTO_STEP_RATIO else "rk4"


def choose_flow_scheme(scheme, lam, kappa, t_max, tol, fixed_grid):
    """The scheme of a flow run, with the adaptive one in the ``"auto"`` choice.

    ``"auto"`` takes an adaptive scheme for a long horizon: a ``tol`` stopping rule (runs to the limit θ∞) or a
    fixed grid of more than :data:`AUTO_ADAPTIVE_STEPS` steps: ``"rodas"`` (:mod:`dlnmomentum.kernels.flow_rodas`)
    for MGF(λ > 0), ``"ndf"`` (:mod:`dlnmomentum.kernels.flow_ndf`, the faster on gradient flow) for λ = 0;
    otherwise :func:`choose_scheme`'s fixed-grid choice. ``fixed_grid`` (a user step ``h``, a start
    refinement or a record schedule in grid steps) asks for a grid: then ``"auto"`` never picks an adaptive
    scheme, and an adaptive scheme itself is refused by the caller.
    """
    check_scheme(scheme)
    if scheme != "auto" or fixed_grid:
        return choose_scheme(scheme, lam, kappa)
    adaptive = "rodas" if lam > 0.0 else "ndf"
    if tol is not None:
        return adaptive
    grid = choose_scheme("auto", lam, kappa)
    steps = float(t_max) / default_step(lam, kappa, grid) if kappa > 0.0 else 0.0
    return adaptive if steps > AUTO_ADAPTIVE_STEPS else grid


def exp_amplification(lam, h, kappas):
    """Amplification matrices (shape ``(len(kappas), 2, 2)``, on ``(w, ẇ)``) of one exponential step of size
    ``h`` on :math:`\\lambda\\ddot w + \\dot w + \\kappa' w = 0`, for each κ' in ``kappas``.

    The scheme of :mod:`dlnmomentum.kernels.flow_exp` with its own coefficients
    (:func:`~dlnmomentum.kernels.flow_exp.exp_coefficients`) and :math:`g(W) = \\kappa' W`.
    """
    from ..kernels import flow_exp as KE

    co = KE.exp_coefficients(lam, h)
    k = np.asarray(kappas, dtype=float)[:, None]
    w = np.array([[1.0, 0.0]])
    v = np.array([[0.0, 1.0]])
    g1 = k * w
    g2 = k * (w + co[KE.C_LH] * v - co[KE.C_HG21] * g1)
    g3 = k * (w + co[KE.C_LH] * v - (co[KE.C_HG31] * g1 + co[KE.C_HG32] * g2))
    g23 = g2 + g3
    g4 = k * (w + co[KE.C_LZ] * v - (co[KE.C_HG41] * g1 + co[KE.C_HG42] * g23))
    g5 = k * (w + co[KE.C_LH] * v - (co[KE.C_HG51] * g1 + co[KE.C_HG52] * g23 + co[KE.C_HG54] * g4))
    wn = w + co[KE.C_LZ] * v - (co[KE.C_HG1] * g1 + co[KE.C_HG4] * g4 + co[KE.C_HG5] * g5)
    vn = co[KE.C_EZ] * v - (co[KE.C_B1] * g1 + co[KE.C_B4] * g4 + co[KE.C_B5] * g5)
    return np.stack([wn, vn], axis=1)


def _stable_exp(h, lam, kappa, samples=257):
    """Is the spectral radius of :func:`exp_amplification` at most 1 for every κ' in [0, κ]?"""
    with np.errstate(over="ignore", invalid="ignore"):
        radius = np.abs(np.linalg.eigvals(exp_amplification(lam, h, np.linspace(0.0, kappa, samples)))).max(axis=1)
    return bool(np.all(radius <= 1.0 + 1e-12))


@functools.lru_cache(maxsize=256)
def _max_stable_step_exp(lam, kappa):
    if kappa == 0.0:
        return math.inf
    hi = 4.0 / kappa
    if 4.0 * lam * kappa > 1.0:  # oscillatory modes of modulus sqrt(κ/λ), treated explicitly
        hi = min(hi, 4.0 * math.sqrt(lam) / math.sqrt(kappa))
    while _stable_exp(hi, lam, kappa) and hi < 1e300:
        hi *= 2.0
    lo = 0.0
    for _ in range(45):
        mid = 0.5 * (lo + hi)
        if _stable_exp(mid, lam, kappa):
            lo = mid
        else:
            hi = mid
    return lo


def _escape_time(problem, lam, u0, v0):
    """Time for the fastest coordinate to grow from |w0|² to the interpolators' scale (start refinement)."""
    w2 = np.maximum((u0 + v0) ** 2, (u0 - v0) ** 2)
    rate = float(np.abs(problem.b).max())
    if rate == 0.0:
        return 0.0
    if lam > 0.0:
        grown = (math.sqrt(1.0 + 4.0 * lam * rate) - 1.0) / (2.0 * lam)
        # the same root without the cancellation that makes it 0 for tiny λ·rate (or inf for huge λ)
        rate = grown if 0.0 < grown < math.inf else 2.0 * rate / (1.0 + math.sqrt(1.0 + 4.0 * lam * rate))
        if not rate > 0.0:
            return 0.0
    scale = max(4.0 * float(np.abs(t).max()) for t in _interpolators(problem))
    ratio = scale / max(float(w2.min()), 1e-300)
    return max(math.log(ratio), 0.0) / (2.0 * rate) if ratio > 1.0 else 0.0


def uniform_grid(t_max, h):
    """Whole number of grid steps covering [0, t_max] with a step <= h; the step actually used.

    ``t_max/h`` must be at most ``MAX_STEPS`` (see :func:`check_grid`).
    """
    n_steps = max(1, math.ceil(t_max / h * (1.0 - 1e-12)))
    return n_steps, t_max / n_steps


def check_grid(t_max, h, lam, kappa, h_max, user_h, scheme="rk4"):
    """Refuse a grid of more than ``MAX_STEPS`` steps, naming the parameter to change and its range.

    The step is limited by the user (``h``), by the fast mode -1/λ (small ``lam``) or by the stiffness of
    the data (``t_max`` for this problem; the scale of X).
    """
    steps = t_max / h if h > 0.0 else math.inf
    if steps <= MAX_STEPS:
        return
    too_many = f"{steps:.3g} grid steps, more than the {MAX_STEPS:.3g} (2**62) a run can count"
    if user_h:
        raise ParameterValueError(f"h must be in [{t_max / MAX_STEPS:.3g}, {h_max:.6g}] for t_max = {t_max!r}: h = "
                                  f"{h!r} needs {too_many}", "h", "t_max")
    # the fast mode -1/λ sets the RK4 step: h ∝ λ (the exponential scheme has no such limit)
    if scheme == "rk4" and lam > 0.0 and h_max >= 0.999 * RK4_REAL_LIMIT * lam:
        raise ParameterValueError(f"lam must be 0 (gradient flow) or in [{lam * steps / MAX_STEPS:.3g}, {LAM_MAX:g}] "
                                  f"for t_max = {t_max!r}: lam = {lam!r} needs a grid step h <= {h_max:.3g} (the fast "
                                  f"mode -1/lambda) and {too_many}", "lam", "t_max")
    raise ParameterValueError(f"t_max must be in (0, {h * MAX_STEPS:.3g}] on this problem: its stiffness kappa = "
                              f"{kappa:.3g} (it grows with the scale of X and with that of the initial weights: "
                              f"alpha, u0, v0) limits the grid step to h = {h:.3g}, and t_max = {t_max!r} needs "
                              f"{too_many}; rescale X and y, or start from smaller weights", "t_max", "alpha")


def warn_large_grid(n_steps, start_steps, start_substeps, what, stacklevel=4):
    """A ``RuntimeWarning`` with the estimate when a flow needs more than ``LARGE_GRID`` RK4 steps."""
    total = n_steps + start_steps * (start_substeps - 1)
    if total > LARGE_GRID:
        import warnings

        refined = (f", of which {start_steps * start_substeps:.3g} in the refined start" if start_steps else "")
        warnings.warn(f"{what} needs {total:.3g} RK4 steps{refined}, each about 4 gradient evaluations: a "
                      "larger h, a shorter t_max or refine_start=None make it cheaper", RuntimeWarning,
                      stacklevel=stacklevel)


def start_refinement(refine_start, problem, lam, u0, v0, t_max, h):
    """(start_steps, start_substeps) from the ``refine_start`` argument."""
    if refine_start is None or refine_start is False:
        return 0, 1
    if isinstance(refine_start, str):
        if refine_start != "auto":
            raise ValueError(f"refine_start must be 'auto', None or a pair (t, substeps), "
                             f"got {refine_start!r}")
        t_start = 3.0 * _escape_time(problem, lam, u0, v0) + 5.0 * lam
        substeps = AUTO_START_SUBSTEPS
    else:
        try:
            t_start, substeps = refine_start
        except (TypeError, ValueError):
            raise TypeError(f"refine_start must be 'auto', None or a pair (t, substeps), "
                            f"got {refine_start!r}") from None
        t_start = as_float("refine_start[0] (time)", t_start, low=0.0)
        substeps = as_int("refine_start[1] (substeps)", substeps, low=1, high=10**6)
    steps = math.ceil(min(t_start, t_max) / h * (1.0 - 1e-12))  # (t_start may be huge: escape from tiny data)
    if steps <= 0 or substeps == 1:
        return 0, 1
    return int(steps), int(substeps)


