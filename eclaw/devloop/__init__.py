"""The developer loop: one-off downloads and callbacks through a spider's middlewares and settings
(``eclaw fetch``, ``parse``, ``shell``), record and replay, project and spider templates (``eclaw new``).

For a spider's tests: :func:`saved_page` makes a response of a saved file, :func:`run_callback`
runs a callback on it and returns what it yielded (``.items``, ``.requests``).
"""

from __future__ import annotations

from eclaw.devloop.callback import Outputs, run_callback
from eclaw.devloop.record import Recorder
from eclaw.devloop.replay import Replayed, replay
from eclaw.devloop.session import Session, saved_page

__all__ = ["Outputs", "Recorder", "Replayed", "Session", "replay", "run_callback", "saved_page"]
