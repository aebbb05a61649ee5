"""Search on the runs list: a rare word lists the runs of the threads that say it, a
common one checks the newest runs one by one; both find the same runs."""

from __future__ import annotations

import pytest

from runs.selectors import runs as selectors
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("common_above", [selectors.SEARCH_MESSAGES, 1])
def test_both_search_plans_find_the_runs_whose_thread_says_the_word(monkeypatch, common_above):
    monkeypatch.setattr(selectors, "SEARCH_MESSAGES", common_above)
    agent = scripted_agent([{"text": "noted"}])
    lunch = [drive(run_start(agent=agent, messages=f"the LUNCH menu {i}")) for i in range(3)]
    drive(run_start(agent=agent, messages="the dinner menu"))
    again = drive(run_start(agent=agent, thread=lunch[0].thread, messages="and dessert"))
    page = selectors.run_list(filters=selectors.RunFilters(q="lunch"))
    assert [run.pk for run in page.items] == [again.pk, *(run.pk for run in reversed(lunch))]
    assert selectors.run_list(filters=selectors.RunFilters(q="zeppelin")).items == []
