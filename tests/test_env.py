"""awaken_site/env.py: django-environ parses, the wrapper adds bounds and loud errors."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from awaken_site.env import env_bool, env_float, env_int, env_list, env_str

NAME = "AWAKEN_TEST_SETTING"


@pytest.fixture
def setenv(monkeypatch: pytest.MonkeyPatch):
    def set_(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(NAME, raising=False)
        else:
            monkeypatch.setenv(NAME, value)

    return set_


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, True),
        ("true", True),
        ("ON", True),
        ("1", True),
        ("no", False),
        ("0", False),
        ("", False),
    ],
)
def test_booleans(setenv, raw, expected):
    setenv(raw)
    assert env_bool(NAME, True) is expected


@pytest.mark.parametrize("raw", ["maybe", "enabled", "tru"])
def test_a_word_that_is_no_boolean_is_refused_not_read_as_false(setenv, raw):
    setenv(raw)
    with pytest.raises(ImproperlyConfigured, match=f"{NAME} must be a boolean"):
        env_bool(NAME, True)


def test_numbers_blank_means_the_default_and_bounds_hold(setenv):
    setenv(" ")
    assert env_int(NAME, 7, minimum=1) == 7 and env_float(NAME, 2.5) == 2.5
    setenv(" 12 ")
    assert env_int(NAME, 7, minimum=1) == 12 and env_float(NAME, 2.5) == 12.0
    setenv("0.25")
    assert env_float(NAME, 1.0, minimum=0.1) == 0.25
    setenv("0")
    with pytest.raises(ImproperlyConfigured, match=f"{NAME} must be >= 1, got 0"):
        env_int(NAME, 7, minimum=1)
    with pytest.raises(ImproperlyConfigured, match=f"{NAME} must be >= 0.1, got 0.0"):
        env_float(NAME, 1.0, minimum=0.1)


@pytest.mark.parametrize("raw", ["soon", "5s", "1e3", "1,000", "1.5.2"])
def test_what_is_not_a_plain_number_is_refused(setenv, raw):
    """django-environ's float cast would read `5s` as 5, `1e3` as 13 and `1,000` as 1."""
    setenv(raw)
    with pytest.raises(ImproperlyConfigured, match=f"{NAME} must be a number"):
        env_float(NAME, 1.0)


def test_an_integer_must_be_one(setenv):
    setenv("2.5")
    with pytest.raises(ImproperlyConfigured, match=f"{NAME} must be an integer, got '2.5'"):
        env_int(NAME, 1)


def test_lists_are_stripped_and_empty_items_dropped(setenv):
    setenv(None)
    assert env_list(NAME, ["x"]) == ["x"]
    setenv(" a, ,b ,")
    assert env_list(NAME, ["x"]) == ["a", "b"]
    setenv("")
    assert env_list(NAME, ["x"]) == []


def test_a_value_starting_with_a_dollar_is_taken_literally(setenv, monkeypatch):
    """`environ.Env()` would read `$OTHER` as the value of the variable OTHER."""
    monkeypatch.setenv("OTHER", "not this")
    setenv("$OTHER")
    assert env_str(NAME, "default") == "$OTHER"
    setenv(None)
    assert env_str(NAME, "default") == "default"
