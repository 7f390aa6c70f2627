"""``python -m gtcore.book``: the ``gtbook`` command."""

import sys

from gtcore.book.cli import _entry

sys.exit(_entry())
