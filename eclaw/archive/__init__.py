"""Web archives: the WARC output (``-o crawl.warc.gz``, :mod:`eclaw.archive.warc`), its CDXJ index,
revisit records on recrawls (docs/archives.md). The ``warc`` format plug-in
(:mod:`eclaw.archive.format`) needs nothing to be listed; writing needs the ``warc`` extra."""
