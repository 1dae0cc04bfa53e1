"""Outputs: format x compression x destination, chosen by a spec (``-o items.jsonl.gz``), each part a
plug-in found by entry point. The contracts: :mod:`eclaw.outputs.api`; building one:
:func:`eclaw.outputs.build.output_for`."""
