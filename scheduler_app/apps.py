from django.apps import AppConfig


class SchedulerAppConfig(AppConfig):
    name = "scheduler_app"
    verbose_name = "Hosts, GPUs, queue and runs"

    def ready(self) -> None:
        # Executor agents are created by agents_app, below this app: it reaches the queue
        # through the callback installed here, never by importing upward.
        from agents_app.services import install_executor_queue
        from scheduler_app.queue import claims as queue

        install_executor_queue(queue)
