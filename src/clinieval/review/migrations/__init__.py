"""Alembic migrations of the review database, run by ``clinieval review init`` (store.init_db)."""
