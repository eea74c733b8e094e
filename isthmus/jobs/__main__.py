"""``python -m isthmus.jobs --config-file ...``: the isthmus-xjob worker."""

import sys

from isthmus.jobs.worker import main

sys.exit(main())
