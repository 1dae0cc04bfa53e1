"""Downloaders: one ``Downloader`` protocol, one fetcher per way of fetching a page."""
