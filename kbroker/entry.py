"""The `kbroker` command's entry point (`python -m kbroker` and the installed console script).

Before anything is imported, `hypothesis` is made unimportable in the process when nothing has
imported it yet: the protocol library (kio) imports it at import time whenever it is installed, to
register test strategies a broker never uses — 0.3-0.5 s of CPU on every broker start and every
`kbroker` command on a machine with the test extras. A program that imports kbroker itself (tests,
kbroker.testing's in-process broker) is left alone.
"""

from __future__ import annotations

import sys


def main() -> int:
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment] - `import hypothesis` raises ImportError
    from kbroker.cli import main as cli_main

    return cli_main()
