from django.apps import AppConfig


class RuntimeAppConfig(AppConfig):
    """The daemon's side of Django: runagentd and the adapters through which the plain-Python
    runtime (agentsys) reads and writes the apps' rows. It sits above every domain app and
    nothing but the project package imports it."""

    name = "runtime_app"
    verbose_name = "Runtime"
