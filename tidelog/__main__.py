"""`python -m tidelog ...` == the `tidelog` console script."""

import sys

from tidelog.cli import main

sys.exit(main())
