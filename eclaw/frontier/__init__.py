"""The frontier: what waits to be fetched. Filters, dedupe, priority order, per-host politeness, spill to disk."""
