"""The micro-benchmarks of the hot functions run, and what they time does its whole work: every
spilled request read back, every event handled, every new fingerprint taken as new."""

from __future__ import annotations

import asyncio

from bench import micro


def test_the_spill_reads_back_every_request_it_wrote() -> None:
    assert micro.spill_cost(hosts=30, pages=90) > 0  # asserts inside: all read back, host by host


def test_the_owner_alone_gets_every_event_and_the_bloom_filter_every_new_fingerprint() -> None:
    assert asyncio.run(micro.dispatch_cost(events=500, owner=True)) > 0
    assert micro.bloom_cost(fps=4000) > 0


def test_a_broad_enqueue_queues_every_new_link_once() -> None:
    assert asyncio.run(micro.broad_enqueue_cost(hosts=50, pages=400)) > 0  # asserts inside: each new link queued
