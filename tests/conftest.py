"""tests/unit is plain Python (`pytest tests/unit -p no:django`: no settings, no database);
everything else runs under pytest-django with the fixtures of tests/django_fixtures.py."""


def pytest_configure(config):
    if config.pluginmanager.has_plugin("django"):
        config.pluginmanager.import_plugin("tests.django_fixtures")
