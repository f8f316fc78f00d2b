from django.apps import AppConfig


class LedgerAppConfig(AppConfig):
    name = "ledger_app"
    verbose_name = "Ledger"
