"""Production settings pass Django's deployment checklist."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[1]


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "ops.example.com",
        "AWAKEN_VAR_DIR": str(tmp_path),
        "AWAKEN_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    }
    env.pop("DATABASE_URL", None)
    result = _check_deploy(env)
    assert result.returncode == 0, result.stdout + result.stderr


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return _manage_check(env, "--deploy", "--fail-level", "WARNING")


def _manage_check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`manage.py check` in a fresh process with `env`."""
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_asks_for_encryption_keys_and_refuses_bad_ones(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "ops.example.com",
        "AWAKEN_VAR_DIR": str(tmp_path),
    }
    env.pop("DATABASE_URL", None)
    env.pop("AWAKEN_ENCRYPTION_KEYS", None)
    unset = _check_deploy(env)
    assert unset.returncode != 0 and "awaken.W001" in unset.stderr
    env["AWAKEN_ENCRYPTION_KEYS"] = f"{Fernet.generate_key().decode()},not-a-key"
    bad = _check_deploy(env)
    assert bad.returncode != 0 and "key 2 is not a Fernet key" in bad.stderr


def test_production_settings_refuse_to_start_without_a_secret_key(tmp_path):
    env = {**os.environ, "DEBUG": "false", "AWAKEN_VAR_DIR": str(tmp_path)}
    env.pop("SECRET_KEY", None)
    result = _manage_check(env)
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr


def test_a_bad_setting_value_fails_loudly(tmp_path):
    env = {**os.environ, "AWAKEN_LEASE_SECONDS": "soon", "AWAKEN_VAR_DIR": str(tmp_path)}
    result = _manage_check(env)
    assert result.returncode != 0 and "AWAKEN_LEASE_SECONDS must be a number" in result.stderr
