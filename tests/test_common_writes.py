"""common.writes.WriteBatch: queued writes go as one statement on PostgreSQL, one by one
on SQLite, and any other statement first sends what is queued."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from common.models import AuditEntry
from common.writes import WriteBatch
from runs.models import HourlyStat
from tests.factories import scripted_agent

pytestmark = pytest.mark.django_db


def entry(action: str) -> AuditEntry:
    return AuditEntry(actor_label="test", action=action, target_type="t", target_id="1")


def writes(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].startswith(("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT"))
    ]


def test_queued_writes_are_sent_when_the_block_ends() -> None:
    with CaptureQueriesContext(connection) as captured, transaction.atomic(), WriteBatch() as batch:
        batch.insert([entry("a"), entry("b")])
        batch.insert([entry("c")])
        assert not writes(captured)  # nothing sent yet
    assert writes(captured)
    assert sorted(AuditEntry.objects.values_list("action", flat=True)) == ["a", "b", "c"]


def test_one_statement_on_postgresql_one_each_elsewhere() -> None:
    agent = scripted_agent([])
    table = HourlyStat._meta.db_table
    upsert = (
        f"INSERT INTO {table} (hour, agent_id, metric, count) VALUES (%s, %s, %s, %s) "
        f"ON CONFLICT (hour, agent_id, metric) DO UPDATE SET count = {table}.count + EXCLUDED.count"
    )
    hour = connection.ops.adapt_datetimefield_value(timezone.now().replace(minute=0, second=0))
    with CaptureQueriesContext(connection) as captured, transaction.atomic(), WriteBatch() as batch:
        batch.insert([entry("a")])
        batch.add(upsert, [hour, agent.pk, "run:open", 2])
        batch.insert([entry("b")])
    sent = writes(captured)
    if connection.vendor == "postgresql":
        assert len(sent) == 1 and sent[0].startswith("WITH w0 AS (INSERT"), sent
    else:
        assert len(sent) == 3, sent
    assert AuditEntry.objects.filter(action__in=["a", "b"]).count() == 2
    assert HourlyStat.objects.get(agent=agent, metric="run:open").count == 2


def test_a_read_inside_the_block_sees_what_was_queued_before_it() -> None:
    with transaction.atomic(), WriteBatch() as batch:
        batch.insert([entry("seen")])
        assert batch.pending
        assert AuditEntry.objects.filter(action="seen").exists()
        assert not batch.pending
        batch.insert([entry("later")])
    assert AuditEntry.objects.filter(action="later").exists()


def test_an_exception_in_the_block_drops_what_is_queued() -> None:
    with pytest.raises(RuntimeError), transaction.atomic(), WriteBatch() as batch:
        batch.insert([entry("dropped")])
        raise RuntimeError("boom")
    assert not AuditEntry.objects.filter(action="dropped").exists()


def test_a_failing_write_fails_the_block_and_its_transaction() -> None:
    agent = scripted_agent([])
    duplicate: list[Any] = [type(agent)(slug=agent.slug, name="again", team_id=agent.team_id)]
    with pytest.raises(IntegrityError), transaction.atomic(), WriteBatch() as batch:
        batch.insert([entry("with-the-failure")])
        batch.insert(duplicate)
    assert not AuditEntry.objects.filter(action="with-the-failure").exists()


def test_inserted_instances_count_as_saved() -> None:
    row = entry("saved")
    with transaction.atomic(), WriteBatch() as batch:
        batch.insert([row])
    assert row._state.adding is False and row._state.db == "default"


def test_a_batch_near_the_parameter_limit_is_sent_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("common.writes.MAX_PARAMS", 40)  # an audit row has 12 parameters
    with CaptureQueriesContext(connection) as captured, transaction.atomic(), WriteBatch() as batch:
        for index in range(5):
            batch.insert([entry(f"part-{index}")])
    assert AuditEntry.objects.filter(action__startswith="part-").count() == 5
    assert len(writes(captured)) == (2 if connection.vendor == "postgresql" else 5)
