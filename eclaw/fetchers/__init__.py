"""Fetchers: one ``Fetcher`` protocol, one fetcher per way of fetching a page."""
