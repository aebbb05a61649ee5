"""The password hasher of the test process: Django's PBKDF2 with one iteration.

A test creates users with passwords by the hundred, and the production iteration count
makes each one cost half a second of CPU. The hash keeps the `pbkdf2_sha256` format (the
iteration count is part of it), so the servers that browser and integration tests start in
child processes, hashing as in production, still verify these passwords."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneIterationPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
