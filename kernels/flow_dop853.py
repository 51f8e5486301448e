r"""The explicit start of the adaptive MGF flow: Dormand and Prince's DOP853 while the flow is not stiff.

Why
---
Rodas5P (:mod:`.flow_rodas`) pays a d × d factorisation and eight stage solves every step, whatever the flow is
doing. Over the first tens to hundreds of time units of MGF(λ) at λ ≳ 0.05 (the escape from a small initialisation
and the damped oscillations of the momentum modes) the flow is not stiff at the accuracy asked: an explicit method
of high order then takes fewer steps than Rodas5P, each about half as dear (measured on the paper's problem,
``benchmarks/experiment_nonstiff_start.py``: to t = 10 at λ = 1, 96 DOP853 steps against 487 of Rodas5P at rtol
1e-10; a DOP853 step 0.47-0.57 of a Rodas5P step), and it is the more accurate through the escape, where most of the
run's error along the way is made. Once the momentum modes have decayed, the flow is a slow tail under fast
curvature, and Rodas5P's steps grow far beyond any explicit method's stability limit. So a run of MGF starts with
DOP853 and switches, once and for good, to Rodas5P (:func:`.flow_rodas_run._rodas_advance` holds both).
**DOP853** (Hairer, Nørsett & Wanner, *Solving ODEs I*, 2nd ed., II.10; the coefficients of Hairer's ``dop853.f``)
has order 8 with embedded estimates of orders 5 and 3 and a dense output of order 7. On a fast decaying mode that
dense output is poor well inside the stability region (at h·ρ = 4.4, 0.17 of the mode's amplitude mid-step), so
its steps are capped at h·ρ̂ ≤ ``DENSE_H_RHO`` (below). Between shorter steps the dense output erred by up to 15-22
times the steps' ends (at λ = 0.05 early on, at the steps' midpoints and at records every 0.01:
``benchmarks/README.md``, "The explicit start's step cap"),
so a record inside a step of the explicit phase (``PHASE`` 0: not in its last, after which the run switches) is
the end of a DOP853 step from that step's start (:func:`_explicit_point`); the crossings and the turns of w± are
located on the dense output.

Method (coefficients as data: ``DOP_C``, ``DOP_A``, ``DOP_B``, ``DOP_E5``, ``DOP_E3``, ``DOP_D``)
-----------------------------------------------------------------------------------------------
For ``y' = f(y)``, step ``h``: ``k₁ = f(y₀)``, ``k_i = f(y₀ + h Σ_{j<i} a_ij k_j)`` for i = 2 … 12,
``y₁ = y₀ + h Σ_j b_j k_j``. The error ``err5 = h Σ_j e5_j k_j`` is weighted by ``err3 = h Σ_j e3_j k_j`` as in
``dop853.f``: with ``S₅``, ``S₃`` the sums of squares of the weighted errors and N their number,
``‖err‖ = S₅ / √((S₅ + 0.01·S₃)·N)``, on the rows and weights of Rodas5P's norm (:func:`.flow_rodas._error_sums`).
The dense output takes ``k₁₃ = f(y₁)`` and three more stages ``k₁₄ … k₁₆`` (rows 13-15 of ``DOP_A``), then
``F₀ = y₁ - y₀``, ``F₁ = h k₁ - F₀``, ``F₂ = 2F₀ - h(k₁₃ + k₁)``, ``F₃₊ₘ = h Σ_j d_mj k_j`` and

.. math::

    y(s) = y_0 + s\big(F_0 + (1-s)(F_1 + s(F_2 + (1-s)(F_3 + s(F_4 + (1-s)(F_5 + s F_6))))))\big),

kept in the form of :mod:`.dense_output` (c₀ = F₁, c₁ = F₂ + F₃, c₂ = F₄ + F₅ - F₃, c₃ = F₆ - 2F₅ - F₄,
c₄ = F₅ - 2F₆, c₅ = F₆). The three dense stages are computed only when something reads the dense output (a
record, a crossing, the end of a call). The controller is the integral one of ``dop853.f``
(``SAFETY·‖err‖^{-1/8}`` within ``[FAC_MIN, FAC_MAX]``, no growth right after a rejection).

The switch to Rodas5P (the policy; the steppers are separate)
-------------------------------------------------------------
Hairer's stiffness test alone (h·ρ̂ beyond the stability boundary in 15 steps) switches late or never here: the
explicit steps do not run into their stability limit before Rodas5P's outgrow them (measured with the threshold
3.25: at t = 418 and 582 at λ = 0.05 and 0.5 and not by t = 3000 at λ = 1, where switching near t = 10, 100 and
100-300 costs least). So the rule compares what each method would do next: every ``TRIAL_EVERY`` explicit steps, one
Rodas5P step is attempted at the explicit controller's step size ``h``. If it is accepted it is the run's next step;
if the step Rodas5P's controller then proposes exceeds ``h / COST_RATIO`` (``COST_RATIO``: a DOP853 step over a
Rodas5P step), the run goes on by Rodas5P for good, else by DOP853 at ``h``. Hairer's test (:func:`_stiff`) stays
as a second rule, for a flow stiff from the start (small λ), where the explicit steps sit at their limit and the
trials alone did not switch (measured at λ = 1e-5: no switch in 2.5e7 explicit steps, the first version of this
rule); its limit is the dense output's cap ``DENSE_H_RHO``, not ``dop853.f``'s stability boundary 6.1 (the capped
steps never reach it), and a λ whose fast mode DOP853 cannot step at all is Rodas5P's from the start
(:func:`_explicit_hopeless`). The phase, the steps
since the last trial and the stiffness counts are solver state (``sstate``), so chunks and resumes change no bit.
On the paper's problem the switch comes after 280-385 explicit steps at λ = 0.05-2 (t ≈ 26 at λ = 0.05, 88 at
λ = 0.5, 190 at λ = 1) and after 26 at λ ≤ 1e-3.
"""

import numpy as np
from numba import njit

from .config import INLINE_JIT_OPTIONS, LEAF_JIT_OPTIONS
from .dense_output import DENSE_STATE_ROWS, _set_point_dense
from .flow_rodas import H_MIN_REL, N_RHS, N_SSTATE, _error_sums, _rhs

#: Nodes c_i of the twelve stages of the step and the three of the dense output (0-based).
DOP_C = np.array([
    0.0, 0.05260015195876773, 0.0789002279381516, 0.1183503419072274,
    0.2816496580927726, 0.3333333333333333, 0.25, 0.3076923076923077,
    0.6512820512820513, 0.6, 0.8571428571428571, 1.0,
    1.0, 0.1, 0.2, 0.7777777777777778,
])
#: The nonzero a_ij (j, a_ij) of each stage i (stages 12-15: f(y₁), then the dense output's three).
_A_NONZERO = (
    (),
    ((0, 0.05260015195876773),),
    ((0, 0.0197250569845379), (1, 0.0591751709536137),),
    ((0, 0.02958758547680685), (2, 0.08876275643042054),),
    ((0, 0.2413651341592667), (2, -0.8845494793282861), (3, 0.924834003261792),),
    ((0, 0.037037037037037035), (3, 0.17082860872947386), (4, 0.12546768756682242),),
    ((0, 0.037109375), (3, 0.17025221101954405), (4, 0.06021653898045596), (5, -0.017578125),),
    ((0, 0.03709200011850479), (3, 0.17038392571223998), (4, 0.10726203044637328), (5, -0.015319437748624402),
     (6, 0.008273789163814023),),
    ((0, 0.6241109587160757), (3, -3.3608926294469414), (4, -0.868219346841726), (5, 27.59209969944671),
     (6, 20.154067550477894), (7, -43.48988418106996),),
    ((0, 0.47766253643826434), (3, -2.4881146199716677), (4, -0.590290826836843), (5, 21.230051448181193),
     (6, 15.279233632882423), (7, -33.28821096898486), (8, -0.020331201708508627),),
    ((0, -0.9371424300859873), (3, 5.186372428844064), (4, 1.0914373489967295), (5, -8.149787010746927),
     (6, -18.52006565999696), (7, 22.739487099350505), (8, 2.4936055526796523), (9, -3.0467644718982196),),
    ((0, 2.273310147516538), (3, -10.53449546673725), (4, -2.0008720582248625), (5, -17.9589318631188),
     (6, 27.94888452941996), (7, -2.8589982771350235), (8, -8.87285693353063), (9, 12.360567175794303),
     (10, 0.6433927460157636),),
    ((0, 0.054293734116568765), (5, 4.450312892752409), (6, 1.8915178993145003), (7, -5.801203960010585),
     (8, 0.3111643669578199), (9, -0.1521609496625161), (10, 0.20136540080403034), (11, 0.04471061572777259),),
    ((0, 0.056167502283047954), (6, 0.25350021021662483), (7, -0.2462390374708025), (8, -0.12419142326381637),
     (9, 0.15329179827876568), (10, 0.00820105229563469), (11, 0.007567897660545699), (12, -0.008298),),
    ((0, 0.03183464816350214), (5, 0.028300909672366776), (6, 0.053541988307438566), (7, -0.05492374857139099),
     (10, -0.00010834732869724932), (11, 0.0003825710908356584), (12, -0.00034046500868740456),
     (13, 0.1413124436746325),),
    ((0, -0.42889630158379194), (5, -4.697621415361164), (6, 7.683421196062599), (7, 4.06898981839711),
     (8, 0.3567271874552811), (12, -0.0013990241651590145), (13, 2.9475147891527724), (14, -9.15095847217987),),
)
#: y₁ = y₀ + h Σ_j b_j k_j over the twelve stages (order 8).
DOP_B = np.array([
    0.054293734116568765, 0.0, 0.0, 0.0,
    0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585,
    0.3111643669578199, -0.1521609496625161, 0.20136540080403034, 0.04471061572777259,
])
#: The order-5 error estimate h Σ_j e5_j k_j.
DOP_E5 = np.array([
    0.01312004499419488, 0.0, 0.0, 0.0,
    0.0, -1.2251564463762044, -0.4957589496572502, 1.6643771824549864,
    -0.35032884874997366, 0.3341791187130175, 0.08192320648511571, -0.022355307863886294,
])
#: The order-3 error estimate h Σ_j e3_j k_j (weights the order-5 one, below).
DOP_E3 = np.array([
    -0.18980075407240762, 0.0, 0.0, 0.0,
    0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585,
    -0.4226823213237919, -0.1521609496625161, 0.20136540080403034, 0.02265179219836082,
])
#: The dense output's rows F₃..F₆ = h Σ_j d_mj k_j over the sixteen stages.
_D_NONZERO = (
    ((0, -8.428938276109013), (5, 0.5667149535193777), (6, -3.0689499459498917), (7, 2.38466765651207),
     (8, 2.117034582445028), (9, -0.871391583777973), (10, 2.2404374302607883), (11, 0.6315787787694688),
     (12, -0.08899033645133331), (13, 18.148505520854727), (14, -9.194632392478356), (15, -4.436036387594894),),
    ((0, 10.427508642579134), (5, 242.28349177525817), (6, 165.20045171727028), (7, -374.5467547226902),
     (8, -22.113666853125306), (9, 7.733432668472264), (10, -30.674084731089398), (11, -9.332130526430229),
     (12, 15.697238121770845), (13, -31.139403219565178), (14, -9.35292435884448), (15, 35.81684148639408),),
    ((0, 19.985053242002433), (5, -387.0373087493518), (6, -189.17813819516758), (7, 527.8081592054236),
     (8, -11.57390253995963), (9, 6.8812326946963), (10, -1.0006050966910838), (11, 0.7777137798053443),
     (12, -2.778205752353508), (13, -60.19669523126412), (14, 84.32040550667716), (15, 11.99229113618279),),
    ((0, -25.69393346270375), (5, -154.18974869023643), (6, -231.5293791760455), (7, 357.6391179106141),
     (8, 93.40532418362432), (9, -37.45832313645163), (10, 104.0996495089623), (11, 29.8402934266605),
     (12, -43.53345659001114), (13, 96.32455395918828), (14, -39.17726167561544), (15, -149.72683625798564),),
)


def _dense_matrix(rows, shape):
    out = np.zeros(shape)
    for i, row in enumerate(rows):
        for j, value in row:
            out[i, j] = value
    return out


#: a_ij of the sixteen stages (rows 0-11: the step's; 12: y₁ itself, as b; 13-15: the dense output's).
DOP_A = _dense_matrix(_A_NONZERO, (16, 16))
#: d_mj of the dense output's F₃ … F₆.
DOP_D = _dense_matrix(_D_NONZERO, (4, 16))
#: Stages of a step; stages with the dense output's (k₁₃ = f(y₁) and three more).
N_DOP_STAGES = 12
N_DOP_DENSE_STAGES = 16
#: Where the attempt leaves its two error estimates (stage slots the step does not use until its dense output).
E5_SLOT = 13
E3_SLOT = 14
#: Order of the step (the controller's exponent is 1/ORDER_EXPLICIT).
ORDER_EXPLICIT = 8
#: DOP853 controls its error at TOLERANCE_FACTOR times the run's rtol and atol. On Rodas5P's error weights its
#: global error along the way is larger for the same tolerances than Rodas5P's (measured on the paper's problem at
#: the default rtol 1e-9: 5.6e-10 at λ = 1, 6.6e-10 at λ = 0.05, against Rodas5P's 1.1e-10 and 1.4e-10); a tenth
#: costs 10^(1/8) ≈ 1.33x its steps.
TOLERANCE_FACTOR = 0.1

# -- solver state: the entries of ``sstate`` after Rodas5P's (.flow_rodas: N_SSTATE) ------------------------
#: 0.0 while the run steps by DOP853 (a fresh MGF run), 1.0 once it steps by Rodas5P (for good; gradient flow
#: ignores it). A checkpoint from before the explicit start reads as 1.0: it continues as it began.
PHASE = N_SSTATE
#: Explicit steps accepted since the last trial of a Rodas5P step.
SINCE_TRIAL = N_SSTATE + 1
#: Hairer's stiffness test (``dop853.f``): accepted steps with h·ρ̂ > STIFF_H_RHO since the count was last reset, and
#: steps in a row without.
STIFF_STEPS = N_SSTATE + 2
NONSTIFF_STEPS = N_SSTATE + 3
N_RODAS_SSTATE = N_SSTATE + 4

# -- the switch to Rodas5P (the policy) ------------------------------------------------------------
#: Explicit steps between two trials of a Rodas5P step.
TRIAL_EVERY = 25
#: DOP853's stability boundary on the negative real axis, in h·ρ (ρ the Jacobian's spectral radius; ``dop853.f``'s
#: stiffness threshold).
STABLE_H_RHO = 6.1
#: DOP853's next step is at most DENSE_H_RHO/ρ̂ (:func:`_rho_hat`), where its dense output stays accurate on the fast
#: mode. On a decaying mode y' = zy the continuous extension errs by 1.5e-4 of the mode's amplitude at hz = -2,
#: 3.0e-3 at -3 and 0.17 at -4.4, its step's end by 5.1e-6, 1.0e-4 and 0.015 (closed forms of the tableau:
#: tests/test_explicit_start.py). Uncapped, at λ = 0.003-0.02 DOP853 stepped at h/λ ≈ 4-5 (its stability boundary
#: allows it), and records between its steps erred by up to 1.2e-8 in θ (λ = 0.003) and 6.4e-8 in w₊ (λ = 0.02)
#: where its steps' ends were within 3e-10 and 6e-10; capped, 1.5e-10 and 2.2e-9 (SciPy's DOP853 at rtol 1e-13).
#: (Records between its steps are now DOP853 steps of their own, :func:`_explicit_point`; the cap keeps the dense
#: output the crossings and the turns of w± are located on.)
DENSE_H_RHO = 3.0
#: Hairer's stiffness test on that cap: STIFF_COUNT accepted steps with h·ρ̂ > STIFF_H_RHO (held at the cap), not
#: interrupted by NONSTIFF_COUNT in a row without, switch to Rodas5P whatever the trials say (a flow stiff from the
#: start, small λ). (``dop853.f`` tests h·ρ̂ against the stability boundary, which the capped steps never reach.)
STIFF_H_RHO = 2.7
STIFF_COUNT = 15
NONSTIFF_COUNT = 6
#: DOP853's stable steps on the fast mode -1/λ are about STABLE_H_RHO·λ; where that is under EXPLICIT_FLOOR times the
#: smallest step the run takes (H_MIN_REL·max(t, 1)) the run goes on by Rodas5P before its next step
#: (:func:`_explicit_hopeless`): at λ ≤ 1e-14 its rejected explicit attempts fell under that step and ended the run
#: "diverged" at t = 0 (an L-stable Rodas5P run from the start converges there in 955 steps).
EXPLICIT_FLOOR = 10.0
#: The cost of a DOP853 step over that of a Rodas5P step on the paper's problem (0.47-0.57 measured in one process,
#: benchmarks/experiment_nonstiff_start.py, AMD EPYC): Rodas5P takes over when its next step is longer than the
#: explicit one by more than 1/COST_RATIO.
COST_RATIO = 0.55


@njit(**LEAF_JIT_OPTIONS)
def _explicit_hopeless(lam, t):
    """Whether DOP853 cannot step at t: its stable steps, about ``STABLE_H_RHO·λ``, are under ``EXPLICIT_FLOOR``
    times the smallest step the run takes (at λ below about 1.6e-13 from the start)."""
    return STABLE_H_RHO * lam < EXPLICIT_FLOOR * H_MIN_REL * max(t, 1.0)


@njit(**INLINE_JIT_OPTIONS)
def _stage_point_explicit(s, h, Y0f, Kf, Uf):
    """u = y₀ + Σ_{j<s} (h a_sj) k_j into ``Uf`` (flat rows (1, m) and stages (stages, 1, m)), j increasing for each
    element, one pass per nonzero a_sj."""
    m = Y0f.shape[1]
    u = Uf[0]
    y0 = Y0f[0]
    for q in range(m):
        u[q] = y0[q]
    for j in range(s):
        a = DOP_A[s, j]
        if a != 0.0:
            c = h * a
            kj = Kf[j, 0]
            for q in range(m):
                u[q] = u[q] + c * kj[q]


@njit(**LEAF_JIT_OPTIONS)
def _attempt_explicit(X, XT, y, H, b, mode, inv_lam, h, Y0, F0, valid_p, valid_m, ws, K, Y1, flat, counters):
    """One DOP853 step of size ``h`` from ``Y0`` (``F0 = f(Y0)``) into ``Y1``; the stages into ``K`` (k₁ = F0 too,
    for the dense output) and the two error estimates into its slots ``E5_SLOT``, ``E3_SLOT``. ``ws`` is the work
    record of :func:`.flow_rodas._workspace`, ``flat`` = (Y0, F0, K, Y1) seen flat, as for
    :func:`.flow_rodas._attempt`."""
    U = ws[9]
    resid = ws[17]
    theta = ws[19]
    g = ws[20]
    Uf = ws[22]
    Y0f, F0f, Kf, Y1f = flat
    m = Y0f.shape[1]
    k0 = Kf[0, 0]
    f0 = F0f[0]
    for q in range(m):
        k0[q] = f0[q]
    for s in range(1, N_DOP_STAGES):
        _stage_point_explicit(s, h, Y0f, Kf, Uf)
        _rhs(X, XT, y, H, b, mode, inv_lam, U, valid_p, valid_m, theta, g, resid, K[s])
        counters[N_RHS] += 1
    y1 = Y1f[0]
    y0 = Y0f[0]
    e5 = Kf[E5_SLOT, 0]
    e3 = Kf[E3_SLOT, 0]
    for q in range(m):
        y1[q] = 0.0
        e5[q] = 0.0
        e3[q] = 0.0
    for j in range(N_DOP_STAGES):
        cb = DOP_B[j]
        c5 = DOP_E5[j]
        c3 = DOP_E3[j]
        kj = Kf[j, 0]
        for q in range(m):
            y1[q] = y1[q] + cb * kj[q]
            e5[q] = e5[q] + c5 * kj[q]
            e3[q] = e3[q] + c3 * kj[q]
    for q in range(m):
        y1[q] = y0[q] + h * y1[q]
        e5[q] = h * e5[q]
        e3[q] = h * e3[q]


@njit(**LEAF_JIT_OPTIONS)
def _error_norm_explicit(lam, Y0, Y1, K, rtol, atol):
    """DOP853's error norm S₅/√((S₅ + 0.01·S₃)·N) (module docstring); NaN when the new point is not finite or
    overflows."""
    rtol = rtol * TOLERANCE_FACTOR
    atol = atol * TOLERANCE_FACTOR
    s5, count = _error_sums(lam, Y0, Y1, K, E5_SLOT, rtol, atol)
    s3, _ = _error_sums(lam, Y0, Y1, K, E3_SLOT, rtol, atol)
    if not (s5 > 0.0):
        return s5  # 0, or NaN
    return s5 / np.sqrt((s5 + 0.01 * s3) * count)


@njit(**LEAF_JIT_OPTIONS)
def _dense_explicit(X, XT, y, H, b, mode, inv_lam, h, Ys, F1, valid_p, valid_m, ws, K, flat, dense):
    """The c rows of ``dense`` of the last accepted DOP853 step (from ``Ys``, of size ``h``; ``F1`` = f at its end;
    its end rows y₀, y₁ already in ``dense``), from its stages ``K``: k₁₃ = F1, the three dense stages, then
    F₁ … F₆ in the form of :mod:`.dense_output`. ``flat`` = (Ys, F1, K) seen flat. The three right-hand sides are
    not counted in ``N_RHS``: the end of every call forms the last step's dense output (it is checkpointed), so
    their number would depend on the chunk length, which changes no bit of the state."""
    U = ws[9]
    resid = ws[17]
    theta = ws[19]
    g = ws[20]
    Uf = ws[22]
    Ysf, F1f, Kf = flat
    m = Ysf.shape[1]
    k12 = Kf[N_DOP_STAGES, 0]
    f1 = F1f[0]
    for q in range(m):
        k12[q] = f1[q]
    for s in range(N_DOP_STAGES + 1, N_DOP_DENSE_STAGES):
        _stage_point_explicit(s, h, Ysf, Kf, Uf)
        _rhs(X, XT, y, H, b, mode, inv_lam, U, valid_p, valid_m, theta, g, resid, K[s])
    d = Ys.shape[1]
    for k in range(4):
        r = DENSE_STATE_ROWS[k]
        for i in range(d):
            delta = dense[1, k, i] - dense[0, k, i]
            kf0 = K[0, r, i]
            f_1 = h * kf0 - delta
            f_2 = 2.0 * delta - h * (K[N_DOP_STAGES, r, i] + kf0)
            f3 = 0.0
            f4 = 0.0
            f5 = 0.0
            f6 = 0.0
            for j in range(N_DOP_DENSE_STAGES):
                kj = K[j, r, i]
                f3 = f3 + DOP_D[0, j] * kj
                f4 = f4 + DOP_D[1, j] * kj
                f5 = f5 + DOP_D[2, j] * kj
                f6 = f6 + DOP_D[3, j] * kj
            f3 *= h
            f4 *= h
            f5 *= h
            f6 *= h
            dense[2, k, i] = f_1
            dense[3, k, i] = f_2 + f3
            dense[4, k, i] = (f4 + f5) - f3
            dense[5, k, i] = (f6 - 2.0 * f5) - f4
            dense[6, k, i] = f5 - 2.0 * f6
            dense[7, k, i] = f6


@njit(**LEAF_JIT_OPTIONS)
def _explicit_point(X, XT, y, H, b, mode, inv_lam, hs, dense, valid_p, valid_m, ws, sub, point):
    """w± and ẇ± at ``hs`` after the start of the last step, by one DOP853 step of size ``hs`` from that start (the
    y₀ rows of ``dense``, which is all of the state the step reads: f's w± and ẇ± rows depend on them alone), into
    ``point`` as the dense output of a step of length 0 there (:func:`.dense_output._set_point_dense`). A record
    between two steps of the explicit start is taken so: its error is that of a step's end, where the dense output
    of order 7 erred by 15-22 times as much on the fast mode (module docstring). ``sub`` = (Ys, Fs, Ks, Ye, flat,
    counts): the step's start, f there, its stages, its end, those seen flat and a counter its right-hand sides go
    to (not the run's: a record is not the solver's work)."""
    Ys, Fs, Ks, Ye, flat, counts = sub
    d = Ys.shape[1]
    for r in range(Ys.shape[0]):
        for i in range(d):
            Ys[r, i] = 0.0
    for k in range(4):
        r = DENSE_STATE_ROWS[k]
        for i in range(d):
            Ys[r, i] = dense[0, k, i]
    _rhs(X, XT, y, H, b, mode, inv_lam, Ys, valid_p, valid_m, ws[19], ws[20], ws[17], Fs)
    _attempt_explicit(X, XT, y, H, b, mode, inv_lam, hs, Ys, Fs, valid_p, valid_m, ws, Ks, Ye, flat, counts)
    _set_point_dense(False, Ye, point)


@njit(**LEAF_JIT_OPTIONS)
def _rho_hat(Y1, U, F1, K):
    """Hairer's estimate of the Jacobian's spectral radius after an accepted DOP853 step to ``Y1`` (``F1`` = f at
    it): ρ̂ = ‖f(y₁) − k₁₂‖ / ‖y₁ − u₁₂‖ over the rows w±, ẇ± (u₁₂, the last stage's point, has c = 1: ``U`` after
    the attempt); 0 when the two points agree."""
    num = 0.0
    den = 0.0
    last = N_DOP_STAGES - 1
    for r in DENSE_STATE_ROWS:
        for i in range(Y1.shape[1]):
            a = F1[r, i] - K[last, r, i]
            b = Y1[r, i] - U[r, i]
            num += a * a
            den += b * b
    return np.sqrt(num / den) if den > 0.0 else 0.0


@njit(**LEAF_JIT_OPTIONS)
def _stiff(h_rho, sstate):
    """Hairer's stiffness test after an accepted DOP853 step with h·ρ̂ = ``h_rho`` (:func:`_rho_hat`), the counts in
    ``sstate``. True when the flow is stiff for DOP853 (``STIFF_COUNT`` steps with h·ρ̂ > ``STIFF_H_RHO``)."""
    if h_rho > STIFF_H_RHO:
        sstate[NONSTIFF_STEPS] = 0.0
        sstate[STIFF_STEPS] += 1.0
        return sstate[STIFF_STEPS] >= STIFF_COUNT
    sstate[NONSTIFF_STEPS] += 1.0
    if sstate[NONSTIFF_STEPS] >= NONSTIFF_COUNT:
        sstate[STIFF_STEPS] = 0.0
    return False
