"""`manage.py apitoken create --user ada --name laptop` | `list [--user ada]` | `revoke ID`."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts_app import selectors, services


class Command(BaseCommand):
    help = "Create, list and revoke per-user API tokens (X-Auth-Token or Bearer)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Create a token; it is printed only once")
        create.add_argument("--user", required=True)
        create.add_argument("--name", required=True)
        listing = actions.add_parser("list", help="Tokens (never the tokens themselves)")
        listing.add_argument("--user")
        revoke = actions.add_parser("revoke", help="Revoke a token by its id (see list)")
        revoke.add_argument("token_id", type=int)

    def handle(self, *args, action, **options):
        if action == "create":
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user named {options['user']!r}")
            try:
                row, token = services.create_token(user=user, name=options["name"])
            except services.TokenError as exc:
                raise CommandError(str(exc)) from None
            self.stderr.write(
                f"Created API token {row.pk} for {user.get_username()}; it is shown only this once:"
            )
            self.stdout.write(token)
        elif action == "list":
            for row in selectors.tokens(username=options["user"]):
                state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
                used = f"{row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never"
                self.stdout.write(
                    f"{row.pk}\t{row.user.get_username()}\t{row.name}\t{row.prefix}…\t"
                    f"last used {used}\t{state}"
                )
        else:
            try:
                row = services.revoke_token(token_id=options["token_id"])
            except services.TokenError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"Revoked API token {row.pk} ({row.name}) of {row.user}")
