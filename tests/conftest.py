import dataclasses

import pytest


@pytest.fixture
def agentsys_config(settings):
    """Replace fields of settings.AGENTSYS for one test: agentsys_config(api_token="t")."""

    def override(**changes):
        settings.AGENTSYS = dataclasses.replace(settings.AGENTSYS, **changes)
        return settings.AGENTSYS

    return override


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # The manifest storage needs `collectstatic` first (serve runs it); page tests do not.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
