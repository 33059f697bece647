"""The first registry schema: devices, provisioning records, state snapshots, audit entries, syncs, DP-SGD runs

Revision ID: 0001
Revises: 
Create Date: 2026-12-08 01:05:54.079951

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('devices',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('board', sa.String(length=32), nullable=True),
    sa.Column('target', sa.Text(), nullable=True),
    sa.Column('emulated', sa.Boolean(), nullable=False),
    sa.Column('added_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('dpsgd_runs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('epsilon', sa.Float(), nullable=True),
    sa.Column('delta', sa.Float(), nullable=False),
    sa.Column('relation', sa.String(length=32), nullable=False),
    sa.Column('manifest', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('audit_entries',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('device_id', sa.String(length=64), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('day', sa.Integer(), nullable=True),
    sa.Column('counter', sa.BigInteger(), nullable=False),
    sa.Column('event', sa.String(length=32), nullable=False),
    sa.Column('arg', sa.Integer(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['device_id'], ['devices.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('device_id', 'seq')
    )
    with op.batch_alter_table('audit_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_entries_device_id'), ['device_id'], unique=False)

    op.create_table('dpsgd_epochs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('epoch', sa.Integer(), nullable=False),
    sa.Column('epsilon', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['dpsgd_runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'epoch')
    )
    with op.batch_alter_table('dpsgd_epochs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dpsgd_epochs_run_id'), ['run_id'], unique=False)

    op.create_table('provisioning_records',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('device_id', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('board', sa.String(length=32), nullable=False),
    sa.Column('model_name', sa.Text(), nullable=True),
    sa.Column('model_sha256', sa.String(length=64), nullable=True),
    sa.Column('image', sa.Text(), nullable=False),
    sa.Column('image_sha256', sa.String(length=64), nullable=False),
    sa.Column('key_fingerprint', sa.String(length=64), nullable=False),
    sa.Column('tool_version', sa.String(length=32), nullable=False),
    sa.ForeignKeyConstraint(['device_id'], ['devices.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('provisioning_records', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_provisioning_records_device_id'), ['device_id'], unique=False)

    op.create_table('state_snapshots',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('device_id', sa.String(length=64), nullable=False),
    sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('day', sa.Integer(), nullable=True),
    sa.Column('recorded_day', sa.Integer(), nullable=False),
    sa.Column('daily_cap', sa.BigInteger(), nullable=False),
    sa.Column('daily_spent', sa.BigInteger(), nullable=False),
    sa.Column('lifetime_cap', sa.BigInteger(), nullable=False),
    sa.Column('lifetime_spent', sa.BigInteger(), nullable=False),
    sa.Column('epsilon_per_query', sa.BigInteger(), nullable=False),
    sa.Column('auth_counter', sa.BigInteger(), nullable=False),
    sa.Column('store', sa.String(length=32), nullable=False),
    sa.Column('store_ok', sa.Boolean(), nullable=False),
    sa.Column('rate_burst', sa.Integer(), nullable=False),
    sa.Column('rate_per_minute', sa.Integer(), nullable=False),
    sa.Column('rate_tarpit_ms', sa.Integer(), nullable=False),
    sa.Column('audit_total', sa.BigInteger(), nullable=True),
    sa.Column('audit_lost', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['device_id'], ['devices.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('state_snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_state_snapshots_device_id'), ['device_id'], unique=False)

    op.create_table('syncs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('device_id', sa.String(length=64), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.Column('snapshot_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['device_id'], ['devices.id'], ),
    sa.ForeignKeyConstraint(['snapshot_id'], ['state_snapshots.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('syncs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_syncs_device_id'), ['device_id'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('syncs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_syncs_device_id'))

    op.drop_table('syncs')
    with op.batch_alter_table('state_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_state_snapshots_device_id'))

    op.drop_table('state_snapshots')
    with op.batch_alter_table('provisioning_records', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_provisioning_records_device_id'))

    op.drop_table('provisioning_records')
    with op.batch_alter_table('dpsgd_epochs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dpsgd_epochs_run_id'))

    op.drop_table('dpsgd_epochs')
    with op.batch_alter_table('audit_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_entries_device_id'))

    op.drop_table('audit_entries')
    op.drop_table('dpsgd_runs')
    op.drop_table('devices')
