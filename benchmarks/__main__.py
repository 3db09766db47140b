"""Entry point of `python -m benchmarks`; everything lives in benchmarks/run.py."""

import sys

from benchmarks.run import main

if __name__ == "__main__":  # guarded: the e2e consumer process (spawn) imports this module
    sys.exit(main())
