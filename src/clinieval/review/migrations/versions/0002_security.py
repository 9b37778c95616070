"""Server-side sessions, login throttling, removed users, and an audit trail no cascade deletes.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

* ``sessions``: one row per signed-in browser, holding the keyed hash of the cookie's random id
  (never the id itself), the user, when it began and when it was last used.
* ``login_failures``: failed sign-ins by name and by address, for throttling.
* ``users.removed_at``: ``review user remove`` keeps the row (their reviews keep their author).
* ``audit``: the foreign keys become ``ON DELETE SET NULL`` (they were ``CASCADE``: deleting a
  user or an assignment erased its history), the row names its user, study and item as text
  (filled in here for the rows already there), and it records administrative actions too
  (``detail``; versions and assignment optional).
* The cookie-signing secret of 0001 (``settings.session_secret``) is deleted: anyone who could
  read the database or a backup of it could sign cookies with it. ``clinieval review init`` makes
  a new one in a file beside the database; this one is not reused.

Written out in full, like 0001, rather than imported from ``clinieval.review.db``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

AUDIT_ACTIONS = (
    "save",
    "submit",
    "login",
    "logout",
    "import",
    "assign",
    "user-add",
    "user-remove",
    "password-reset",
    "revoke",
    "rotate-secret",
)


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _when(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        _when("created_at"),
        _when("last_seen"),
        sa.Column("address", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_sessions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_sessions")),
    )
    op.create_index(op.f("ix_sessions_user_id"), "sessions", ["user_id"], unique=False)
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        _when("at"),
        sa.CheckConstraint("kind IN ('user', 'address')", name=op.f("ck_login_failures_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_failures")),
    )
    op.create_index(
        op.f("ix_login_failures_kind_key_at"), "login_failures", ["kind", "key", "at"], unique=False
    )
    op.create_index(op.f("ix_login_failures_at"), "login_failures", ["at"], unique=False)

    # a plain ADD COLUMN: batch mode would rebuild ``users`` on SQLite, and dropping the old table
    # with foreign keys on deletes every assignment through their cascade
    op.add_column("users", _when("removed_at", nullable=True))

    # ``audit`` is rebuilt on SQLite (nothing refers to it, so dropping the old copy deletes nothing)
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.add_column(sa.Column("user_name", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("study", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("item", sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column("detail", sa.JSON(), nullable=True))
        for column in ("assignment_id", "user_id", "old_version", "new_version"):
            batch_op.alter_column(column, existing_type=sa.Integer(), nullable=True)
        batch_op.drop_constraint(op.f("fk_audit_assignment_id_assignments"), type_="foreignkey")
        batch_op.drop_constraint(op.f("fk_audit_user_id_users"), type_="foreignkey")
        batch_op.create_foreign_key(
            op.f("fk_audit_assignment_id_assignments"),
            "assignments",
            ["assignment_id"],
            ["id"],
            ondelete="SET NULL",
        )
        batch_op.create_foreign_key(
            op.f("fk_audit_user_id_users"), "users", ["user_id"], ["id"], ondelete="SET NULL"
        )
        batch_op.drop_constraint(op.f("ck_audit_action"), type_="check")
        batch_op.create_check_constraint(op.f("ck_audit_action"), f"action IN ({_in(AUDIT_ACTIONS)})")

    op.execute(
        "UPDATE audit SET"
        " user_name = (SELECT users.name FROM users WHERE users.id = audit.user_id),"
        " study = (SELECT studies.name FROM assignments JOIN studies ON studies.id = assignments.study_id"
        " WHERE assignments.id = audit.assignment_id),"
        " item = (SELECT items.key FROM assignments JOIN items ON items.id = assignments.item_id"
        " WHERE assignments.id = audit.assignment_id)"
    )
    op.execute("UPDATE audit SET user_name = '?' WHERE user_name IS NULL")
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.alter_column("user_name", existing_type=sa.String(length=200), nullable=False)

    op.execute("DELETE FROM settings WHERE key = 'session_secret'")


def downgrade() -> None:
    # the audit rows of administrative actions do not fit 0001's table: they are dropped
    op.execute(
        "DELETE FROM audit WHERE action NOT IN ('save', 'submit') OR assignment_id IS NULL OR user_id IS NULL"
    )
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_audit_action"), type_="check")
        batch_op.create_check_constraint(op.f("ck_audit_action"), "action IN ('save', 'submit')")
        batch_op.drop_constraint(op.f("fk_audit_assignment_id_assignments"), type_="foreignkey")
        batch_op.drop_constraint(op.f("fk_audit_user_id_users"), type_="foreignkey")
        batch_op.create_foreign_key(
            op.f("fk_audit_assignment_id_assignments"),
            "assignments",
            ["assignment_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_foreign_key(
            op.f("fk_audit_user_id_users"), "users", ["user_id"], ["id"], ondelete="CASCADE"
        )
        for column in ("assignment_id", "user_id", "old_version", "new_version"):
            batch_op.alter_column(column, existing_type=sa.Integer(), nullable=False)
        for column in ("detail", "item", "study", "user_name"):
            batch_op.drop_column(column)
    # not through batch mode: on SQLite that rebuilds ``users``, and dropping the old table with
    # foreign keys on would delete every assignment through their cascade
    op.execute("ALTER TABLE users DROP COLUMN removed_at")
    op.drop_table("login_failures")
    op.drop_table("sessions")
