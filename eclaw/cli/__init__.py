"""The ``eclaw`` command line (also ``python -m eclaw``)."""

from eclaw.cli.main import command, main

__all__ = ["command", "main"]
