"""A management command's check that the database it is about to use has been migrated."""
from __future__ import annotations

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor


def require_migrated(using: str = DEFAULT_DB_ALIAS) -> None:
    """``CommandError`` naming the database and the command to run when migrations are
    unapplied (a fresh SQLite file, a new PostgreSQL database), instead of a traceback ending
    in "no such table". Reads only the migration table; changes nothing."""
    conn = connections[using]
    executor = MigrationExecutor(conn)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        name = conn.settings_dict.get("NAME")
        raise CommandError(f"the database {name} is not migrated ({len(plan)} migrations to apply): "
                           "run `python manage.py migrate` first (`make demo` does it for the embedded database)")
