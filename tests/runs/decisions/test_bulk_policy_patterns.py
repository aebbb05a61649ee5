"""Decide by policy: a malformed argument pattern is an error in the preview, never a
preview of "no match"; well-formed ones (literal parentheses written as sets) still match."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common.errors import InvalidInput
from runs.decisions.services.bulk import TicketPolicy, glob_problem, tickets_matching
from tests.runs.bulk_helpers import note, waiting_on

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("((((", "a ( that is never closed"),
        ("npm (", "a ( that is never closed"),
        (")", "a ) that closes nothing"),
        ("[abc", "a [ that no ] closes"),
        ("write_note((((", "a ( that is never closed"),
        ('title =~ "(((("', "invalid regex"),
    ],
)
def test_a_malformed_pattern_is_refused_saying_what_is_wrong(pattern, problem):
    with pytest.raises(InvalidInput) as refused:
        tickets_matching(TicketPolicy(arguments_pattern=pattern))
    assert "does not parse" in refused.value.message and problem in refused.value.message


@pytest.mark.parametrize("glob", ["npm *", "a(b)c", "[(]*", "echo [)]", "[]x]", "[!(]"])
def test_balanced_globs_are_fine(glob):
    assert glob_problem(glob) is None


def test_literal_parentheses_written_as_sets_match():
    (ticket,) = waiting_on("noter", note("lunch (team)"))
    found = tickets_matching(TicketPolicy(tool="write_note", arguments_pattern="lunch [(]*"))
    assert [t.pk for t in found] == [ticket.pk]


def test_the_preview_of_a_malformed_pattern_is_an_error_not_no_match(operator_client):
    waiting_on("noter", note("lunch"))
    response = operator_client.post(
        reverse("runs:inbox-policy"), {"arguments_pattern": "(((("}, **HX
    )
    text = response.content.decode()
    assert response.status_code == 400
    assert 'class="flash error"' in text and "a ( that is never closed" in text
    assert "No waiting ticket matches" not in text
