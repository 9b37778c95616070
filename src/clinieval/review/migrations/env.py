"""Alembic's entry point for the review database.

clinieval runs migrations only from code (:func:`clinieval.review.store.init_db`), which passes an
open connection in ``config.attributes``; there is no alembic.ini and no offline (SQL script) mode.
Batch mode is on so that later migrations can alter tables on SQLite, which has almost no
``ALTER TABLE`` (Alembic rebuilds the table instead).
"""

from __future__ import annotations

from alembic import context

from clinieval.review.db import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run review migrations through `clinieval review init`, which passes a connection")
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
