"""Distributed crawling on Redis: the shared frontier, items stored once, merged stats."""
