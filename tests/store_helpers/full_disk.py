"""Subprocess helper of tests/faults/test_full_disk.py: ``dlnm`` on a small tmpfs, under ``unshare -rm``.

Usage: ``unshare -rm python full_disk.py SPEC_JSON`` (a private mount namespace: the tmpfs is seen by this
process and its children only, and goes away with them). The spec holds

* ``mnt``: an empty directory to mount the tmpfs on; ``size``: its size (``"32k"``);
* ``first``: the ``dlnm`` arguments of the first command; ``{store}`` stands for ``<mnt>/s.h5``, ``{mnt}`` for
  the mount point;
* ``copy_in``: optional path of a store to copy to ``<mnt>/s.h5`` before the first command, with its side
  files (``PATH.ckpt``, ``PATH.lock`` ... become ``s.h5.ckpt``, ``s.h5.lock`` ...);
* ``fill_before``: optional N: fill the disk before the first command, leaving N bytes free (0: to the last
  byte);
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


def fill(directory, leave=0):
    """Write zeros to ``directory/filler`` until the disk is full, then give back ``leave`` bytes; returns the
    size of the filler."""
    written = 0
    with open(os.path.join(directory, "filler"), "wb", buffering=0) as fh:
        while True:
            try:
                written += fh.write(bytes(4096))
            except OSError:
                break
        written = max(written - leave, 0)
        fh.truncate(written)
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
    if spec.get("copy_in"):
        folder, name = os.path.split(spec["copy_in"])
        for side in sorted(os.listdir(folder)):
            if side.startswith(name):
                shutil.copyfile(os.path.join(folder, side), store + side[len(name):])
    if spec.get("fill_before") is not None:
        fill(mnt, spec["fill_before"])
    report = {"first": dlnm([a.format(store=store, mnt=mnt) for a in spec["first"]], mnt, spec.get("fill_after_wave"))}
    if spec.get("grow"):
        if os.path.exists(os.path.join(mnt, "filler")):
            os.unlink(os.path.join(mnt, "filler"))
        subprocess.run(["mount", "-o", f"remount,size={spec['grow']}", mnt], check=True)
        report["then"] = dlnm([a.format(store=store, mnt=mnt) for a in spec["then"]], mnt)
    if os.path.exists(store):
        shutil.copyfile(store, spec["out"])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
