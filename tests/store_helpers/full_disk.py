"""Subprocess helper of tests/faults/test_full_disk.py: ``dlnm`` on a small tmpfs, under ``unshare -rm``.

Usage: ``unshare -rm python full_disk.py SPEC_JSON`` (a private mount namespace: the tmpfs is seen by this
process and its children only, and goes away with them). The spec holds

* ``mnt``: an empty directory to mount the tmpfs on; ``size``: its size (``"32k"``);
* ``first``: the ``dlnm`` arguments of the first command; ``{store}`` stands for ``<mnt>/s.h5``;
* ``fill_after_wave``: optional N: after the command logged its N-th sweep wave (``--log``), fill the
  disk to the last byte;
* ``grow``: optional size: afterwards, remove the filler, remount the tmpfs with this size and run the
  ``then`` arguments;
* ``out``: where to copy the store at the end (outside the tmpfs).

Prints one JSON line: the exit codes, the error lines and the files on the tmpfs after each command.
"""

import json
import os
import shutil
import subprocess
import sys


def fill(directory):
    """Write zeros to ``directory/filler`` until the disk is full; returns the bytes written."""
    written = 0
    with open(os.path.join(directory, "filler"), "wb", buffering=0) as fh:
        while True:
            try:
                written += fh.write(bytes(4096))
            except OSError:
                return written


def dlnm(argv, mnt, fill_after=None):
    proc = subprocess.Popen([sys.executable, "-m", "dlnmomentum", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    errors, waves, filled = [], 0, None
    for line in proc.stderr:
        if line.startswith("[dlnm sweep] wrote"):
            waves += 1
            if fill_after is not None and waves == fill_after:
                filled = fill(mnt)
        else:
            errors.append(line.rstrip())
    proc.wait()
    return {"rc": proc.returncode, "errors": errors, "waves": waves, "filled": filled,
            "files": sorted(os.listdir(mnt))}


def main():
    spec = json.loads(sys.argv[1])
    mnt = spec["mnt"]
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={spec['size']}", "tmpfs", mnt], check=True)
    store = os.path.join(mnt, "s.h5")
    report = {"first": dlnm([a.format(store=store) for a in spec["first"]], mnt, spec.get("fill_after_wave"))}
    if spec.get("grow"):
        if os.path.exists(os.path.join(mnt, "filler")):
            os.unlink(os.path.join(mnt, "filler"))
        subprocess.run(["mount", "-o", f"remount,size={spec['grow']}", mnt], check=True)
        report["then"] = dlnm([a.format(store=store) for a in spec["then"]], mnt)
    if os.path.exists(store):
        shutil.copyfile(store, spec["out"])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
