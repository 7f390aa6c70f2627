"""``python -m gtbook``: the ``gtbook`` command."""

import sys

from gtbook.cli import _entry

sys.exit(_entry())
