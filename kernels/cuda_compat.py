"""The few device primitives the CUDA kernels need, for a real GPU and for Numba's CUDA simulator.

Import this module before anything imports ``numba.cuda``: it first repairs NumPy for
numba-cuda (see below), then imports ``numba.cuda`` and defines

* :func:`fma` -- ``x·y + z`` rounded once (IEEE ``fusedMultiplyAdd``, PTX ``fma.rn.f64``), the
  operation :func:`.config.fma` is on the CPU;
* :func:`mul` -- ``x·y`` rounded once and *never contracted* into a following add. NVVM contracts
  a multiply feeding an add into an FMA by default (``-fma=1``; numba-cuda does not expose the
  option), which would change the bits of ``s + a·b`` relative to the CPU kernels (compiled
  without contraction). libdevice's ``__nv_dmul_rn`` is ``mul.rn.f64``, which the PTX optimiser
  must not fuse. Every product whose result feeds an addition goes through :func:`mul`;
* :func:`warp_sync` -- the memory barrier of the 32 lanes of a warp (``__syncwarp``);
* :func:`warp_sync_all` -- :func:`warp_sync`, then true on every lane iff ``ok`` is true on every
  lane (``__all_sync``; the simulator needs shared scratch rows ``votes[w, parity, :]`` of the warp,
  alternating between calls, the GPU ignores them).

The simulator (``NUMBA_ENABLE_CUDASIM=1``) runs the kernels as Python threads. Its ``cuda.fma`` is
``a*b + c`` (two roundings) and it has no warp intrinsics, so there :func:`fma` calls the CPU
kernels' own ``llvm.fma.f64`` and the warp primitives are block barriers: the simulated kernels are
launched with one warp per block (:data:`SIMULATOR` tells the launcher). Its ``cuda.shared.array``
finds a block's array by the calling line and creates it when absent, without a lock: two threads of a
block that both find it absent each create one, and the one that loses keeps a private "shared" array
(measured: one block in about 1 600 of a 32-thread kernel, often enough to fail the simulated sweeps'
bit-for-bit tests now and then). Importing this module under the simulator puts that lookup under a lock
(:func:`_locked_shared_array`).
"""

import numpy as np

# numba-cuda looks up ``np.row_stack`` when it is imported; NumPy 2.5 removed that alias of
# ``np.vstack``. Restore it (only where it is missing) instead of pinning NumPy.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack  # noqa: NPY201 (restores the removed alias on purpose)

from numba import config as _numba_config  # noqa: E402
from numba import cuda  # noqa: E402

#: True when numba.cuda is the CUDA simulator (decided by numba when numba.cuda is first imported).
SIMULATOR = bool(_numba_config.ENABLE_CUDASIM)

#: Mask of all 32 lanes of a warp.
FULL_MASK = 0xFFFFFFFF


def device(func):
    """Decorator of device functions that use no ``cuda.*`` API: ``cuda.jit(device=True)`` on a GPU.

    The simulator calls them as plain Python functions: its device-function wrapper rebinds the module's
    ``cuda`` globals on every call, which would dominate the simulated run time (and races between
    the simulated threads, see below).
    """
    return func if SIMULATOR else cuda.jit(device=True)(func)


if SIMULATOR:
    import sys
    import threading
    import traceback

    from numba import njit
    from numba.cuda.simulator import kernelapi as _kernelapi

    from .config import fma as _llvm_fma

    _SHARED_LOCK = threading.Lock()
    _unlocked_shared_array = _kernelapi.FakeCUDAShared.array

    def _locked_shared_array(self, shape, dtype):
        """The simulator's ``FakeCUDAShared.array`` with its find-or-create under one lock (module docstring):
        every thread of a block gets the one array of the calling line."""
        if shape == 0:  # dynamic shared memory: one buffer, no lookup
            return _unlocked_shared_array(self, shape, dtype)
        # the caller's (file, line), as the simulator keys it (its frame passed explicitly, as it does)
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]
        with _SHARED_LOCK:
            found = self._allocations.get(caller)
            if found is None:
                dt = _kernelapi.numpy_support.as_dtype(dtype) if isinstance(dtype, _kernelapi.types.Type) else dtype
                found = np.empty(shape, dt)
                self._allocations[caller] = found
        return found

    _kernelapi.FakeCUDAShared.array = _locked_shared_array

    @njit(cache=False)
    def _cpu_fma(x, y, z):
        return _llvm_fma(x, y, z)

    def fma(x, y, z):
        """x·y + z rounded once (the CPU kernels' ``llvm.fma.f64``; the simulator's ``cuda.fma`` rounds twice)."""
        return _cpu_fma(float(x), float(y), float(z))

    def mul(x, y):
        """x·y (Python float arithmetic never contracts)."""
        return x * y

    from numba.cuda.simulator.kernel import _get_kernel_context

    # Plain functions, not simulated device functions: the simulator rebinds a device function's
    # module global ``cuda`` on entry and restores it on exit, per call and without a lock, so with 32
    # threads in the same function one thread can find ``cuda`` restored under it. The kernel's own
    # globals are rebound once per launch; these reach the launch's simulated ``cuda`` module directly.

    def warp_sync():
        # One warp per block in the simulator: the block barrier is the warp barrier.
        _get_kernel_context().syncthreads()

    def warp_sync_all(ok, votes, w, parity, lane):
        # One barrier (syncthreads_and costs two): lanes post their vote, then read all of them. Two
        # rows alternate: a lane may post its next vote before a slower lane has read this one, but
        # it posts the vote after that only past the next barrier, which the slower lane reaches
        # after reading.
        votes[w, parity, lane] = 1 if ok else 0
        _get_kernel_context().syncthreads()
        total = 0
        for i in range(votes.shape[2]):
            total += votes[w, parity, i]
        return total == votes.shape[2]

else:
    from numba.cuda import libdevice

    @device
    def fma(x, y, z):
        """x·y + z rounded once (``llvm.fma.f64`` -> PTX ``fma.rn.f64``)."""
        return cuda.fma(x, y, z)

    @device
    def mul(x, y):
        """x·y rounded once, never fused with a following add (libdevice ``__nv_dmul_rn``)."""
        return libdevice.dmul_rn(x, y)

    @cuda.jit(device=True)
    def warp_sync():
        cuda.syncwarp(FULL_MASK)

    @cuda.jit(device=True)
    def warp_sync_all(ok, votes, w, parity, lane):
        cuda.syncwarp(FULL_MASK)
        return cuda.all_sync(FULL_MASK, ok)
