"""Subprocess helper of tests/faults/test_full_disk.py: ``dlnm`` on a disk that fills up in the middle of a wave.

Usage: ``python enospc.py NBYTES DLNM_ARGS...``. Every write into an HDF5 dataset counts its bytes; the
write that would pass ``NBYTES`` fails with ``OSError(ENOSPC)`` before it reaches the file, as a write
to a copy-on-write file system (btrfs, ZFS), where even an overwrite needs free space, would. Exits with
``dlnm``'s exit code.
"""

import errno
import os
import sys

import h5py
import numpy as np


def main():
    budget = int(sys.argv[1])
    used = [0]
    setitem = h5py.Dataset.__setitem__

    def failing_setitem(self, key, value):
        used[0] += np.asarray(value).nbytes
        if used[0] > budget:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.file.filename)
        return setitem(self, key, value)

    h5py.Dataset.__setitem__ = failing_setitem
    from dlnmomentum.cli import main as dlnm

    sys.exit(dlnm(sys.argv[2:]))


if __name__ == "__main__":
    main()
