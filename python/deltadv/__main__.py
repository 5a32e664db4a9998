"""``python -m deltadv``: the ``deltadv`` command line (see :mod:`deltadv.cli`)."""

import sys

from deltadv.cli import main

sys.exit(main())
