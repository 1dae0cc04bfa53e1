"""The ``eclaw`` command line (also ``python -m eclaw``)."""

from eclaw.cli.main import main

__all__ = ["main"]
