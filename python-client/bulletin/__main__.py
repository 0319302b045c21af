"""`python -m bulletin ...` is the `bulletin` command (providers start workers this way)."""

import sys

from ._cli import main

sys.exit(main())
