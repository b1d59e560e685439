"""``python -m airflow_tfjob.trainjob.runtimes install``: see the package's docstring."""

import sys

from airflow_tfjob.trainjob.runtimes import main

sys.exit(main())
