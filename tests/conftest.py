import dataclasses

import pytest


@pytest.fixture
def agentsys_config(settings):
    """Replace fields of settings.AGENTSYS for one test: agentsys_config(api_token="t")."""

    def override(**changes):
        settings.AGENTSYS = dataclasses.replace(settings.AGENTSYS, **changes)
        return settings.AGENTSYS

    return override
