"""Numba kernels of dlnmomentum (installed as ``dlnmomentum.kernels``).

Only ``@njit`` code lives here: arrays and scalars in, arrays filled in place,
an integer status or count out. No I/O, no Python objects. Validation and
conversion happen in the thin Python layer of :mod:`dlnmomentum`.
"""
