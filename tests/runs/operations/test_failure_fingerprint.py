"""Failure fingerprints (runs/operations/services/fingerprint.py): the same failure with other ids,
numbers and quoted values is one group; another kind, place or message is another."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.operations.services.fingerprint import MASK, fingerprint, masked, tool_named

PROVIDER = "provider:openai"


def same(a: str, b: str, *, kind: str = "error", source: str = PROVIDER) -> bool:
    return fingerprint(kind, source, a).digest == fingerprint(kind, source, b).digest


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("provider error 503: upstream failed", "provider error 502: upstream failed"),
        (
            "run 5befe9a7-0936-4ab0-812a-02ba0596741d could not be resumed",
            "run 35644307-d2a0-4d66-9643-e99dbb7e1eb2 could not be resumed",
        ),
        ("call perm_call_8f3a91 was refused", "call perm_call_77bd02 was refused"),
        ("bad value 'alpha beta' in field", 'bad value "gamma" in field'),
        ("digest 0xdeadbeef mismatch", "digest 0x1234abcd mismatch"),
        ("object 5f2b9c8e1a7d missing", "object a1b2c3d4e5f6 missing"),
        (
            "cannot reach provider at http://10.0.0.7:8080/v1: refused",
            "cannot reach provider at http://10.0.0.7:9090/v2/chat: refused",
        ),
        ("took  12.5 s\nthen   failed", "took 3 s then failed"),
    ],
)
def test_what_varies_between_occurrences_is_masked(first, second):
    assert same(first, second), (masked(first), masked(second))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("cannot reach provider", "provider timed out after 30s"),
        ("malformed response from provider", "malformed stream data from provider"),
        ("cannot reach provider at http://a.example", "cannot reach provider at http://b.example"),
    ],
)
def test_different_failures_differ(first, second):
    assert not same(first, second)


def test_the_kind_and_the_place_are_part_of_it():
    message = "provider error 503"
    assert (
        fingerprint("error", PROVIDER, message).digest
        != fingerprint("error", "provider:other", message).digest
    )
    assert (
        fingerprint("error", PROVIDER, message).digest
        != fingerprint("timeout", PROVIDER, message).digest
    )
    assert (
        fingerprint("error", PROVIDER, message).digest
        != fingerprint("error", "endpoint:remote", message).digest
    )


def test_a_message_naming_a_tool_groups_by_the_tool():
    print_ = fingerprint("error", PROVIDER, "tool 'write_note' failed: disk 93% full")
    assert print_.source == "tool:write_note"
    assert tool_named("Tool: send_email crashed") == "send_email"
    assert tool_named("no tools here") == ""


def test_the_title_is_the_masked_message():
    print_ = fingerprint("error", PROVIDER, "provider error 503: 'req_91bc' failed")
    assert print_.title == f"provider error {MASK}: {MASK} failed"
    assert fingerprint("error", "", "").title == "(no message)"
    assert len(fingerprint("error", "", "x " * 1000).title) <= 300


ids = st.one_of(
    st.uuids().map(str),
    st.integers(min_value=0, max_value=10**12).map(str),
    st.text(alphabet="0123456789abcdef", min_size=6, max_size=24).filter(
        lambda s: any(c.isdigit() for c in s)
    ),
    st.builds(
        "{}_{}{}".format,
        st.sampled_from(["req", "call", "perm_call", "run"]),
        st.text(alphabet="abcdefxyz0123456789", max_size=8),
        st.integers(min_value=0, max_value=9999),
    ),
)
quoted = st.text(alphabet="abc xyz-_.:/0123456789ÄÉ", max_size=40).map(lambda s: f"'{s}'")
templates = st.sampled_from(
    [
        "provider error {}: upstream said {}",
        "run {} failed on ticket {}",
        "cannot decode {} near {}",
        "internal error: KeyError: {} in {}",
    ]
)


@given(template=templates, a=st.tuples(ids, quoted), b=st.tuples(ids, quoted))
def test_same_message_with_other_ids_is_the_same_group(template, a, b):
    first = template.format(*a)
    second = template.format(*b)
    assert same(first, second), (masked(first), masked(second))


@given(st.text(max_size=300))
def test_any_message_has_a_stable_bounded_fingerprint(message):
    print_ = fingerprint("error", PROVIDER, message)
    assert print_ == fingerprint("error", PROVIDER, message)
    assert len(print_.digest) == 64 and len(print_.title) <= 300
