"""``python -m dlnmomentum`` is the ``dlnm`` command line."""

import sys

from .cli import main

sys.exit(main())
