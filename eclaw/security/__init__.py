"""What crosses the crawl's boundary: which credentials a hop may carry, and what eclaw may write.

- :mod:`eclaw.security.headers`: which request headers are credentials;
- :mod:`eclaw.security.scope`: the one rule of what a hop may carry (scheme, host, port);
- :mod:`eclaw.security.redact`: the one redaction boundary every writer goes through.

The threat model and every limit are in docs/security.md.
"""
