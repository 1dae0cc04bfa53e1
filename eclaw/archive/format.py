"""The ``warc`` output format (an ``eclaw.formats`` entry point): it claims ``.warc`` and
``.warc.gz`` (it compresses each record itself) and makes a :class:`~eclaw.archive.warc.WarcOutput`.

Importing this module needs no extra, so the format is known (and its suffixes listed) even without
warcio; making an archive without the ``warc`` extra is one clear line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eclaw.exceptions import ConfigError

if TYPE_CHECKING:
    from eclaw.outputs.api import OutputOptions, OutputSpec

__all__ = ["WARC", "WarcFormat"]


class WarcFormat:
    """Web archives: a file format (:class:`~eclaw.outputs.api.FileFormat`) whose output watches pages."""

    name = "warc"
    suffixes = (".warc.gz", ".warc")

    def __repr__(self) -> str:
        return "WarcFormat()"

    def make(self, path: str, spec: OutputSpec, options: OutputOptions) -> Any:
        if spec.scheme != "file":  # a staged upload would not watch pages
            raise ConfigError(f"output {spec.shown}: a web archive is written to a local file; copy it after the crawl")
        try:
            from eclaw.archive.warc import WarcOutput  # warcio and surt: the warc extra
        except ImportError as exc:
            need = f"web archives need the warc extra: pip install 'eclaw[warc]' ({exc})"
            raise ConfigError(f"{spec.shown}: {need}") from None
        return WarcOutput(path, run_key=options.run_key)


WARC = WarcFormat()
