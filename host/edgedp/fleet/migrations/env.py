"""Alembic's environment for the fleet registry (edgedp.fleet.registry.upgrade runs it).

The caller passes an open connection in ``config.attributes["connection"]``; without one (the
``alembic`` command run by a developer with ``-x url=...`` or sqlalchemy.url set) it connects
to the URL itself. New revisions: ``alembic -c host/edgedp/fleet/migrations/alembic.ini revision
--autogenerate -m "..."`` against a database at the newest revision (docs/fleet.md)."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from edgedp.fleet.registry import Base

config = context.config
target_metadata = Base.metadata


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no database: pass -x url=URL or set sqlalchemy.url")
    with create_engine(url).connect() as conn:
        run(conn)
        conn.commit()
