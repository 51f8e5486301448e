"""Numba kernels of dlnmomentum (installed as ``dlnmomentum.kernels``).

Only ``@njit`` code and the constants it reads live here: arrays and scalars in,
arrays filled in place, an integer status or count out; no Python objects.
Validation and conversion happen in the thin Python layer of :mod:`dlnmomentum`.

Importing this package has one side effect: it calls :func:`.cache.drop_stale_caches`,
which may delete the Numba cache files (``*.nbi``, ``*.nbc``) of these modules (in
``__pycache__``, or where Numba caches them instead: under ``NUMBA_CACHE_DIR``, or the
user-wide cache of a read-only install) and writes a digest of their sources next to them. Why: Numba keys a
cached function by its own file only, but the kernels inline each other (and freeze
each other's constants), so after an edit of one module the cached code of another
would load and silently differ from the source; the digest covers every ``*.py``
file here, and any edit drops the whole cache. Importing a kernel module compiles
nothing: each kernel compiles (or loads from the cache) on its first call.

Modules
-------
``config``            the one compilation policy (strict IEEE, ``fma``, inlining options) and ``OVERFLOW``
``status``            the run status codes the kernels return
``layout``            the shared state, mode and record layouts, the padding rule, the layer view of a buffer
``rng``               the explicit random state (xoshiro256**) and minibatch draws
``mgd``               one MGD / SMGD run (heavy ball), and its gradients
``crossings``         the Hermite crossing search inside a step
``flow``              one MGF(λ) / gradient-flow run (fixed-step RK4): state rows, stages, crossings
``flow_exp``          the exponential RK4 for MGF(λ) at small λ
``flow_run``          the single-run driver of a fixed-grid flow, either scheme
``flow_rodas``        the adaptive Rosenbrock method Rodas5P for MGF(λ) (tableau, controller, structured solve)
``flow_rodas_gf``     the same method's gradient flow, in its mirror coordinate P
``flow_rodas_run``    the adaptive flow's driver: accepted steps, dense output, crossings, records
``small_linalg``      the small dense LU and Cholesky factorisations of the Rodas steps
``vec_ir``            the ``<LW x double>`` LLVM-IR of the lockstep kernels, and the adaptive schemes' register sums
``sweep``             lockstep MGD / SMGD: many runs in SIMD groups
``flow_sweep``        lockstep fixed-grid flows: many flows in groups
``networks``          MGD / SMGD on fully connected networks (one update shared by runs and sweeps)
``linear_networks``   the product-form gradient of linear networks without biases
``network_sweep``     the points of a network sweep advanced in one call
``cuda_mgd``          the GPU sweep kernel (numba.cuda, one warp per run), with ``cuda_compat`` (device
                      primitives, simulator) and ``cuda_limits`` (the shapes it runs, without numba.cuda)
``cache``             keeping the Numba cache (in-tree or ``NUMBA_CACHE_DIR``) consistent with the sources
"""

from .cache import SOURCES_STAMP, drop_stale_caches

__all__ = ["SOURCES_STAMP", "drop_stale_caches"]

drop_stale_caches()
