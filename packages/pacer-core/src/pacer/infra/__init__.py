"""What pacer's integrations share, outside the core's strategy API: Maven artifacts fetched into a cache (``jars``),
whether a cached file is safe to load as code (``trusted``), and what the commands that start local daemons share
(``daemons``)."""

__all__ = ["daemons", "jars", "trusted"]
