"""``python -m airflow_tfjob.jobs.trainjob.runtimes install``: see the package's docstring."""

import sys

from airflow_tfjob.jobs.trainjob.runtimes import main

sys.exit(main())
