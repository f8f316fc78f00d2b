from django.apps import AppConfig


class HostsAppConfig(AppConfig):
    """The machines that run `manage.py runagentd`: below agents (an agent runs on a host)
    and the scheduler (which books a host's GPUs, in scheduler_app)."""

    name = "hosts_app"
    verbose_name = "Hosts"
