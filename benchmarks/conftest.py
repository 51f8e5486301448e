import os
import platform
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def machine_description():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                     platform.processor())
    except OSError:
        model = platform.processor()
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


@pytest.fixture(scope="session")
def machine():
    return machine_description()
