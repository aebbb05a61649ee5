"""`manage.py create_user NAME --role viewer|operator|admin`: users with a role, made from
the terminal."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError
from django.db import connections
from django.urls import reverse

from common.models import AuditEntry
from common.roles import ROLES

pytestmark = pytest.mark.django_db

User = get_user_model()
PASSWORD = re.compile(r"^password: (\S+)", re.MULTILINE)
# what each role may do beyond the one below it (common.roles)
MAY = {"viewer": "runs.view_run", "operator": "runs.decide_ticket", "admin": "agents.change_agent"}


def create(*args: str, stdin: str | None = None) -> str:
    out = io.StringIO()
    extra = {"stdin": io.StringIO(stdin)} if stdin is not None else {}
    call_command("create_user", *args, stdout=out, **extra)
    return out.getvalue()


@pytest.fixture
def from_terminal(capsys, monkeypatch):
    """Run the command as `manage.py` does (argument errors and CommandError exit with
    their status), keeping the test database open (`run_from_argv` closes connections)."""
    monkeypatch.setattr(connections, "close_all", lambda: None)

    def run(*args: str) -> tuple[int, str]:
        command = load_command_class("runs.accounts", "create_user")
        with pytest.raises(SystemExit) as exited:
            command.run_from_argv(["manage.py", "create_user", *args])
        return int(exited.value.code or 0), capsys.readouterr().err

    return run


def roles_of(name: str) -> list[str]:
    user = User.objects.get(username=name)
    return sorted(user.groups.values_list("name", flat=True))


@pytest.mark.parametrize("role", list(ROLES))
def test_creates_each_role_in_its_group_and_prints_a_password_that_logs_in(client, role):
    out = create(f"{role}-user", "--role", role, "--email", f"{role}@example.com")

    assert f"created {role} user '{role}-user'" in out
    (password,) = PASSWORD.findall(out)
    assert len(password) >= 20
    user = User.objects.get(username=f"{role}-user")
    assert roles_of(user.username) == [role]
    assert user.email == f"{role}@example.com"
    assert user.is_staff is (role == "admin")  # only admins reach /admin/
    assert not user.is_superuser
    allowed = {
        perm for name, perm in MAY.items() if list(ROLES).index(name) <= list(ROLES).index(role)
    }
    for perm in MAY.values():
        assert user.has_perm(perm) is (perm in allowed), perm
    assert client.login(username=user.username, password=password)
    entry = AuditEntry.objects.get(action="user.create", target_id=user.username)
    assert entry.source == "cli" and entry.after == {"role": role, "email": user.email}
    assert password not in str(entry.after)


def test_refuses_an_existing_user_with_exit_status_2(from_terminal):
    create("olga", "--role", "viewer")
    before = User.objects.get(username="olga").password

    with pytest.raises(CommandError, match="already exists; pass --update-role") as refused:
        create("olga", "--role", "admin")
    assert refused.value.returncode == 2

    status, err = from_terminal("olga", "--role", "operator")
    assert status == 2
    assert "user 'olga' already exists" in err
    user = User.objects.get(username="olga")
    assert roles_of("olga") == ["viewer"] and not user.is_staff
    assert user.password == before


def test_update_role_replaces_the_role_and_keeps_the_password(client):
    password = PASSWORD.findall(create("olga", "--role", "admin"))[0]

    out = create("olga", "--role", "operator", "--update-role")

    assert "updated operator user 'olga'" in out
    assert "password" not in out
    assert roles_of("olga") == ["operator"]
    user = User.objects.get(username="olga")
    assert not user.is_staff and user.has_perm("runs.decide_ticket")
    assert not user.has_perm("agents.change_agent")
    assert client.login(username="olga", password=password)
    entry = AuditEntry.objects.get(action="user.role")
    assert entry.before == {"roles": ["admin"]} and entry.after["role"] == "operator"


def test_password_from_stdin_is_used_and_never_printed(client):
    secret = "correct horse battery staple 42"
    out = create("dana", "--role", "operator", "--password-stdin", stdin=secret + "\n")

    assert secret not in out and "password" not in out
    assert client.login(username="dana", password=secret)
    response = client.post(reverse("login"), {"username": "dana", "password": secret}, follow=False)
    assert response.status_code == 302  # the login page lets her in too


def test_update_role_with_password_stdin_sets_the_new_password(client):
    create("dana", "--role", "viewer")
    create(
        "dana",
        "--role",
        "viewer",
        "--update-role",
        "--password-stdin",
        stdin="another long passphrase\n",
    )
    assert client.login(username="dana", password="another long passphrase")


@pytest.mark.parametrize(
    ("stdin", "error"),
    [("", "no password"), ("\n", "no password"), ("12345\n", "password refused")],
)
def test_refuses_a_missing_or_weak_password_from_stdin(stdin, error):
    with pytest.raises(CommandError, match=error):
        create("dana", "--role", "viewer", "--password-stdin", stdin=stdin)
    assert not User.objects.filter(username="dana").exists()


def test_refuses_an_unknown_role_and_a_bad_email(from_terminal):
    status, err = from_terminal("olga", "--role", "root")
    assert status == 2
    assert "invalid choice: 'root'" in err and "viewer" in err

    with pytest.raises(CommandError, match="invalid choice: 'root'"):
        call_command("create_user", "olga", role="root", stdout=io.StringIO())
    with pytest.raises(CommandError, match="not a valid email"):
        create("olga", "--role", "viewer", "--email", "not-an-address")
    assert not User.objects.filter(username="olga").exists()
