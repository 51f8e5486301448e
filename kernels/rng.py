"""Explicit random state for stochastic kernels (xoshiro256** seeded by splitmix64).

The state is a ``uint64`` array of length 4 owned by the caller, advanced in
place by the kernels and saved in checkpoints, so that a run is reproducible
from its seed whatever the chunking, the thread count or an interruption.

Reference: D. Blackman and S. Vigna, "Scrambled linear pseudorandom number
generators", ACM TOMS 47 (2021); generator ``xoshiro256**`` and the seeding
generator ``splitmix64``.
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_U5 = np.uint64(5)
_U7 = np.uint64(7)
_U17 = np.uint64(17)
_U45 = np.uint64(45)
_U0 = np.uint64(0)
_U1 = np.uint64(1)


@njit(**JIT_OPTIONS)
def _rotl(x, k):
    return (x << k) | (x >> (np.uint64(64) - k))


@njit(**JIT_OPTIONS)
def _splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31)), x + _GOLDEN


@njit(**JIT_OPTIONS)
def _seed_state(seed, stream, state):
    """Fill ``state`` (uint64[4]) from a 64-bit seed and a stream number."""
    x = np.uint64(seed) ^ (np.uint64(stream) * _MIX2)
    for i in range(4):
        out, x = _splitmix64(x)
        state[i] = out
    if state[0] == _U0 and state[1] == _U0 and state[2] == _U0 and state[3] == _U0:
        state[0] = _U1


@njit(**JIT_OPTIONS)
def _next_u64(state):
    result = _rotl(state[1] * _U5, _U7) * np.uint64(9)
    t = state[1] << _U17
    state[2] ^= state[0]
    state[3] ^= state[1]
    state[1] ^= state[2]
    state[0] ^= state[3]
    state[2] ^= t
    state[3] = _rotl(state[3], _U45)
    return result


@njit(**JIT_OPTIONS)
def _below(state, n):
    """Uniform integer in [0, n) without modulo bias (rejection sampling)."""
    un = np.uint64(n)
    # 2**64 mod n computed in uint64 arithmetic: (0 - n) mod n.
    threshold = (_U0 - un) % un
    while True:
        x = _next_u64(state)
        if x >= threshold:
            return np.int64(x % un)


@njit(**JIT_OPTIONS)
def _draw_batch(state, perm, batch, replace):
    """Fill ``batch`` with B sample indices in [0, n), n = len(perm).

    With replacement the B indices are i.i.d. uniform. Without replacement they
    are distinct: a partial Fisher-Yates shuffle of the persistent permutation
    ``perm`` (part of the random state), uniform over B-subsets in random order.
    """
    n = perm.shape[0]
    b = batch.shape[0]
    if replace:
        for j in range(b):
            batch[j] = _below(state, n)
    else:
        for j in range(b):
            k = j + _below(state, n - j)
            tmp = perm[j]
            perm[j] = perm[k]
            perm[k] = tmp
            batch[j] = perm[j]


@njit(**JIT_OPTIONS)
def _fill_batches(state, perm, replace, out):
    """Draw ``out.shape[0]`` consecutive batches into the rows of ``out``."""
    for k in range(out.shape[0]):
        _draw_batch(state, perm, out[k], replace)
    return out.shape[0]
