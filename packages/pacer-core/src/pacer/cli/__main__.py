"""``python -m pacer.cli``: the ``pacer`` command."""

import sys

from pacer.cli.program import main

sys.exit(main())
