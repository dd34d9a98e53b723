"""``python -m syncplan``: the same as the ``syncplan`` command."""

import sys

from syncplan.cli import main

sys.exit(main())
