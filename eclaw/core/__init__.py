"""The engine room: one running crawl and its collaborators (event bus, fetching, callbacks,
pipelines, accounting, checkpoints). Internal: users drive crawls through :class:`eclaw.Engine`."""
