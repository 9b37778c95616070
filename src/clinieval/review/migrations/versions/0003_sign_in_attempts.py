"""Every sign-in attempt is audited: failed and throttled ones join the successful ones.

Revision ID: 0003
Revises: 0002
Create Date: 2027-01-12

The ``login_failures`` rows that throttling counts are pruned after the throttling window, so a
security officer asking "who tried which names from where last month" found nothing. The audit
trail now also takes ``login-failed`` and ``login-throttled`` rows (the name as typed, the client
address, the outcome; never the password): only the check constraint on ``audit.action`` changes.

Written out in full, like 0001 and 0002, rather than imported from ``clinieval.review.db``.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BEFORE = (
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
AFTER = (*BEFORE, "login-failed", "login-throttled")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _constrain(values: tuple[str, ...]) -> None:
    # ``audit`` is rebuilt on SQLite (nothing refers to it, so dropping the old copy deletes nothing)
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_audit_action"), type_="check")
        batch_op.create_check_constraint(op.f("ck_audit_action"), f"action IN ({_in(values)})")


def upgrade() -> None:
    _constrain(AFTER)


def downgrade() -> None:
    # 0002's table cannot hold these rows; they are dropped
    op.execute("DELETE FROM audit WHERE action IN ('login-failed', 'login-throttled')")
    _constrain(BEFORE)
