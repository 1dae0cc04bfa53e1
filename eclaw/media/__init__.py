"""Files named by items, downloaded through the crawl and kept content-addressed (:mod:`eclaw.media.pipeline`)."""

from eclaw.media.images import ImagesPipeline
from eclaw.media.pipeline import FileRefused, FilesPipeline
from eclaw.media.store import FileStore, Stored

__all__ = ["FileRefused", "FileStore", "FilesPipeline", "ImagesPipeline", "Stored"]
