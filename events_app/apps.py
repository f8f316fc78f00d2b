from django.apps import AppConfig


class EventsAppConfig(AppConfig):
    name = "events_app"
    verbose_name = "Events"
