"""PBKDF2 at one iteration, for the test process only. Django's default (1,000,000 iterations,
~0.25 s of CPU a hash) was paid by every test that makes a user with a password or logs one
in. The algorithm keeps its name (`pbkdf2_sha256`) and a hash names its own iterations, so a
web process or runagentd started by a test, on the project's own settings, still verifies a
password the test set."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneIterationPBKDF2(PBKDF2PasswordHasher):
    iterations = 1

    def must_update(self, encoded: str) -> bool:
        return False  # a login in the test process must not re-hash at the default's cost
