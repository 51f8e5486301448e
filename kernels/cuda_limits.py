"""The shapes the CUDA kernels (:mod:`.cuda_mgd`) run, without importing numba.cuda.

A sweep is checked against them before any work, also where the points run elsewhere (a Dask client that has no
GPU, :func:`dlnmomentum.sweeps.execute.check_device`), so a shape the kernels refuse never reaches a worker.
"""

#: Lanes of a warp.
WARP = 32
#: Largest supported d (coordinates per lane: ceil(d/32) <= 16; beyond, the per-lane state spills).
MAX_D = 512
#: Largest supported n (residuals per lane: ceil(n/32) <= 32; shared memory per warp stays small).
MAX_N = 1024


def check_shape(d, n, batch_size):
    """Raise ValueError naming the parameter when the kernels do not support this shape."""
    if not 1 <= d <= MAX_D:
        raise ValueError(f"the CUDA engine supports d in [1, {MAX_D}] (one warp per run, ceil(d/32) <= "
                         f"{MAX_D // WARP} coordinates per lane), got d={d}")
    if not 1 <= n <= MAX_N:
        raise ValueError(f"the CUDA engine supports n in [1, {MAX_N}] samples, got n={n}")
    if not 0 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, n={n}] (0: full batch), got {batch_size}")
