import sys

from kbroker.entry import main

sys.exit(main())
