"""The output for a spec (``-o items.csv``): kept here for its importers; see :mod:`eclaw.outputs.build`."""

from __future__ import annotations

from eclaw.outputs.build import output_for

__all__ = ["output_for"]
