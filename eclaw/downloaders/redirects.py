"""Deprecated: this module moved to ``eclaw.fetchers.hops``; the old path goes in the next release."""

# eclaw-rename: keep file (an alias of a module that moved)

from eclaw._deprecated import moved

__getattr__ = moved(__name__, "eclaw.fetchers.hops")
