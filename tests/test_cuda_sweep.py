"""``sweep(..., device="cuda")``: the same Sweep, store and resume as the CPU engine.

Without a GPU the CUDA engine runs in Numba's CUDA simulator, in a subprocess (numba decides
once per process whether ``numba.cuda`` is simulated); the subprocess runs this file as a script
and reports, field by field, whether the CUDA sweep equals the CPU sweep bit for bit.
"""

import json
import os
import sys

import numpy as np
import pytest
from cuda_sim import simulated_report

import dlnmomentum as dm

SPEC = dict(n=5, d=6, s=2, n_test=20)


def _compare(a, b):
    return {name: bool(np.array_equal(a[name], b[name], equal_nan=True)) for name in a.fields} | {
        "_done": bool(np.array_equal(a.done, b.done))}


def _simulate(tmp):
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)
    sys.setswitchinterval(5e-5)  # the simulator's barriers poll under the GIL
    from dlnmomentum.kernels import cuda_compat

    assert cuda_compat.SIMULATOR, "run with NUMBA_ENABLE_CUDASIM=1"
    grid = dict(gammas=[0.02, 0.3, 40.0], betas=[0.0, 0.7], steps=40, reps=2, seed=3, tol=1e-3)
    report = {}
    cpu = dm.sweep(SPEC, **grid)
    gpu = dm.sweep(SPEC, **grid, device="cuda")
    report["full_batch"] = _compare(gpu, cpu)
    report["statuses"] = sorted({int(s) for s in np.unique(cpu.status)})
    smgd = dict(grid, batch_size=2, replace=True)
    report["smgd"] = _compare(dm.sweep(SPEC, **smgd, device="cuda"), dm.sweep(SPEC, **smgd))
    # a store started on the CPU, interrupted after its first wave, continued on the GPU
    path = os.path.join(tmp, "g.h5")
    calls = []

    def stop_after_first_wave(line):
        calls.append(line)
        import signal

        os.kill(os.getpid(), signal.SIGINT)

    import signal

    # the subprocess inherits an ignored SIGINT when the suite runs in the background: give it Python's handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    part = dm.sweep(SPEC, **grid, store=path, wave_size=8, log=stop_after_first_wave)
    report["interrupted"] = bool(not part.complete and part.done.sum() > 0)
    resumed = dm.resume_sweep(path, device="cuda", wave_size=8)
    report["resumed"] = _compare(resumed, cpu)
    print(json.dumps(report))


if __name__ == "__main__":
    _simulate(sys.argv[1])


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    return simulated_report(__file__, tmp_path_factory.mktemp("cuda"), timeout=900)


@pytest.mark.parametrize("case", ["full_batch", "smgd", "resumed"])
def test_cuda_sweep_equals_cpu_sweep(simulated, case):
    unequal = [name for name, same in simulated[case].items() if not same]
    assert not unequal, f"{case}: fields differ from the CPU sweep: {unequal}"


def test_cases_cover_converged_max_steps_and_diverged(simulated):
    assert simulated["statuses"] == [1, 2, 3]
    assert simulated["interrupted"]


def test_device_is_validated_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="device must be one of"):
        dm.sweep(SPEC, gammas=[0.1], betas=[0.5], steps=5, device="gpu", store=tmp_path / "x.h5")
    assert not (tmp_path / "x.h5").exists()
    with pytest.raises(ValueError, match="flow sweeps"):
        dm.sweep(SPEC, lams=[0.1], t_max=1.0, device="cuda")
