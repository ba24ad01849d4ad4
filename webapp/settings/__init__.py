"""Settings modules, one per environment: ``dev`` (default, no services), ``test``, ``prod``."""
