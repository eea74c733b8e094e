"""Create Neutron's schema from its models: ``python -m isthmus.sandbox.neutron_schema URL``."""

import sys

import sqlalchemy
from neutron.db.migration.models import head  # noqa: F401 - imports every model
from neutron_lib.db import model_base


def main(url: str) -> None:
    engine = sqlalchemy.create_engine(url)
    model_base.BASEV2.metadata.create_all(engine)


if __name__ == "__main__":
    main(sys.argv[1])
