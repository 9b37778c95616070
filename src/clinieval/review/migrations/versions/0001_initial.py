"""The initial review schema: users, settings, studies, items, answers, assignments, audit.

Revision ID: 0001
Revises:
Create Date: 2026-11-24

Written out in full rather than imported from ``clinieval.review.db``: a migration is a snapshot
of the schema at its revision, and must keep creating that schema after the models move on.
Timestamps are plain ``DateTime(timezone=True)`` here; the ORM's ``UTCDateTime`` only converts
values on their way in and out.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.Integer(), nullable=False)


def _when(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete="CASCADE"
    )


def _index(table: str, *columns: str) -> None:
    with op.batch_alter_table(table, schema=None) as batch_op:
        batch_op.create_index(batch_op.f(f"ix_{table}_{'_'.join(columns)}"), list(columns), unique=False)


def upgrade() -> None:
    op.create_table(
        "settings",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_settings")),
    )
    op.create_table(
        "studies",
        _id(),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        _when("created_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_studies")),
        sa.UniqueConstraint("name", name=op.f("uq_studies_name")),
    )
    op.create_table(
        "users",
        _id(),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("password_hash", sa.String(length=500), nullable=False),
        _when("created_at"),
        sa.CheckConstraint("role IN ('admin', 'reviewer')", name=op.f("ck_users_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "items",
        _id(),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=500), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("reference", sa.Text(), nullable=True),
        sa.Column("author", sa.String(length=200), nullable=True),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        _fk("items", "study_id", "studies"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_items")),
        sa.UniqueConstraint("study_id", "key", name=op.f("uq_items_study_id_key")),
    )
    _index("items", "study_id")
    op.create_table(
        "answers",
        _id(),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=500), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        _fk("answers", "item_id", "items"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answers")),
        sa.UniqueConstraint("item_id", "key", name=op.f("uq_answers_item_id_key")),
    )
    _index("answers", "item_id")
    op.create_table(
        "assignments",
        _id(),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("answer_order", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        _when("updated_at"),
        sa.CheckConstraint("status IN ('pending', 'draft', 'submitted')", name=op.f("ck_assignments_status")),
        _fk("assignments", "item_id", "items"),
        _fk("assignments", "study_id", "studies"),
        _fk("assignments", "user_id", "users"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignments")),
        sa.UniqueConstraint("item_id", "user_id", name=op.f("uq_assignments_item_id_user_id")),
    )
    _index("assignments", "study_id")
    _index("assignments", "user_id", "study_id")
    op.create_table(
        "audit",
        _id(),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        _when("at"),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("old", sa.JSON(), nullable=True),
        sa.Column("new", sa.JSON(), nullable=True),
        sa.Column("old_version", sa.Integer(), nullable=False),
        sa.Column("new_version", sa.Integer(), nullable=False),
        sa.CheckConstraint("action IN ('save', 'submit')", name=op.f("ck_audit_action")),
        _fk("audit", "assignment_id", "assignments"),
        _fk("audit", "user_id", "users"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit")),
    )
    _index("audit", "assignment_id")


def downgrade() -> None:
    for table in ("audit", "assignments", "answers", "items", "users", "studies", "settings"):
        op.drop_table(table)
