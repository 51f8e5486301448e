"""Running a test module's GPU checks under Numba's CUDA simulator, in a child process.

``NUMBA_ENABLE_CUDASIM`` must be set before Numba is imported, so a module with simulator checks runs itself as a
script in a child process (its ``__main__`` prints a JSON report as the last line) and its tests read that report.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def simulated_report(module_file, out_dir, timeout):
    """Run ``module_file`` as a script with the simulator on (argument: ``out_dir``); its last stdout line, parsed."""
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT + (os.pathsep + path if path else ""))
    proc = subprocess.run([sys.executable, os.path.abspath(module_file), str(out_dir)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
