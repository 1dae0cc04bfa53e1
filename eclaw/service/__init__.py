"""``eclaw serve``: a long-running service that runs crawls as jobs (each its own process), fires
them on cron schedules, and answers a JSON API (described by an OpenAPI schema at
``/api/openapi.json``). Jobs and schedules live in SQLite or PostgreSQL (:mod:`eclaw.service.db`)."""
