"""The `cardhour` command: one Typer app, one module per noun.

Exit codes: 0 success; 2 for any expected error (`ApiError`, `CardhourError`), printed as one
line `error: CODE: MESSAGE` on stderr, and for usage errors (Typer's default).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, ParamSpec, TypeVar

import typer

from cardhour.cli import admin, estimate, simulate, up
from cardhour.cli.accounts import auth, ssh_keys
from cardhour.cli.billing import balance, prices, statements
from cardhour.cli.billing import ledger as ledger_cli
from cardhour.cli.common import Connection
from cardhour.cli.compute import instances, launch, offers, slurm, ssh
from cardhour.cli.grants import proposals as grants
from cardhour.cli.grants import reviews as grants_review
from cardhour.cli.hosts import admin as hosts_admin
from cardhour.cli.hosts import agent as host_agent
from cardhour.cli.marketplace import apps
from cardhour.cli.storage import volumes
from cardhour.client import ApiError
from cardhour.core.errors import CardhourError

ERROR_EXIT = 2
P = ParamSpec("P")
R = TypeVar("R")


def _one_line_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command: an expected error becomes one stderr line and exit code 2."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (ApiError, CardhourError) as exc:
            message = " ".join(exc.message.split())  # one line, whatever the server sent
            typer.echo(f"error: {exc.code}: {message}", err=True)
            raise typer.Exit(ERROR_EXIT) from None

    return run


app = typer.Typer(
    name="cardhour",
    help="cardhour: rent GPUs by the card-hour, or run your own GPU cloud (`cardhour up`).",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option("--url", envvar="CARDHOUR_URL", help="Server URL for every command."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="CARDHOUR_API_KEY", help="API key for every command."),
    ] = None,
) -> None:
    ctx.obj = Connection(url, api_key)


COMMANDS: dict[str, Callable[..., None]] = {
    "signup": auth.signup,
    "login": auth.login,
    "offers": offers.offers,
    "images": offers.images,
    "launch": launch.launch,
    "status": instances.status,
    "stop": instances.stop,
    "start": instances.start,
    "down": instances.down,
    "balance": balance.balance,
    "usage": statements.usage,
    "invoice": statements.invoice,
    "prices": prices.prices,
    "quote": prices.quote,
    "up": up.up,
    "simulate": simulate.simulate,
    "estimate": estimate.estimate,
    "notifications": grants.notifications,
    "ssh": ssh.ssh,
    "slurm": slurm.slurm,
    "agent": host_agent.agent,
}
for _name, _command in COMMANDS.items():
    app.command(_name)(_one_line_errors(_command))

admin_app = typer.Typer(
    name="admin", help="Operator commands (need the admin role).", no_args_is_help=True
)
ADMIN_COMMANDS: dict[str, Callable[..., None]] = {"defrag": admin.defrag}
ADMIN_COMMANDS["topup"] = admin.topup
ADMIN_COMMANDS["price"] = prices.set_price
ADMIN_COMMANDS["credit"] = prices.grant_credit
ADMIN_COMMANDS["role"] = grants_review.role
ADMIN_COMMANDS["nodes"] = admin.nodes
ADMIN_COMMANDS["resume"] = admin.resume
ADMIN_COMMANDS["auth-events"] = admin.auth_events
for _name, _command in ADMIN_COMMANDS.items():
    admin_app.command(_name)(_one_line_errors(_command))
hosts_app = typer.Typer(
    name="hosts",
    help="GPU servers running `cardhour agent`: enrol, list, remove.",
    no_args_is_help=True,
)
HOSTS_COMMANDS: dict[str, Callable[..., None]] = {
    "add": hosts_admin.add,
    "list": hosts_admin.list_hosts,
    "remove": hosts_admin.remove,
}
for _name, _command in HOSTS_COMMANDS.items():
    hosts_app.command(_name)(_one_line_errors(_command))
admin_app.add_typer(hosts_app, name="hosts")
app.add_typer(admin_app, name="admin")

grants_app = typer.Typer(
    name="grants", help="Sponsorship proposals: apply, review, decide.", no_args_is_help=True
)
GRANTS_COMMANDS: dict[str, Callable[..., None]] = {
    "apply": grants.apply,
    "edit": grants.edit,
    "submit": grants.submit,
    "withdraw": grants.withdraw,
    "status": grants.status,
    "review": grants_review.review,
    "assign": grants_review.assign,
    "decide": grants_review.decide,
    "list": grants_review.list_all,
}
for _name, _command in GRANTS_COMMANDS.items():
    grants_app.command(_name)(_one_line_errors(_command))
app.add_typer(grants_app, name="grants")

ssh_keys_app = typer.Typer(
    name="ssh-keys",
    help="SSH public keys of your account: every new instance gets them.",
    no_args_is_help=True,
)
SSH_KEYS_COMMANDS: dict[str, Callable[..., None]] = {
    "add": ssh_keys.add,
    "list": ssh_keys.list_keys,
    "remove": ssh_keys.remove,
}
for _name, _command in SSH_KEYS_COMMANDS.items():
    ssh_keys_app.command(_name)(_one_line_errors(_command))
app.add_typer(ssh_keys_app, name="ssh-keys")

volumes_app = typer.Typer(
    name="volumes",
    help="Persistent volumes: your data outlives instances (launch --volume NAME:/path).",
    no_args_is_help=True,
)
VOLUMES_COMMANDS: dict[str, Callable[..., None]] = {
    "create": volumes.create,
    "list": volumes.list_volumes,
    "show": volumes.show,
    "delete": volumes.delete,
}
for _name, _command in VOLUMES_COMMANDS.items():
    volumes_app.command(_name)(_one_line_errors(_command))
app.add_typer(volumes_app, name="volumes")

apps_app = typer.Typer(
    name="apps",
    help="The AI app marketplace: call apps per call; publish yours (70% of each call).",
    no_args_is_help=True,
)
APPS_COMMANDS: dict[str, Callable[..., None]] = {
    "list": apps.list_apps,
    "show": apps.show,
    "call": apps.call,
    "mine": apps.mine,
    "publish": apps.publish,
    "submit": apps.submit,
    "rollback": apps.rollback,
    "earnings": apps.earnings,
    "payout": apps.payout,
    "payouts": apps.payouts,
}
for _name, _command in APPS_COMMANDS.items():
    apps_app.command(_name)(_one_line_errors(_command))
app.add_typer(apps_app, name="apps")
admin_app.command("app")(_one_line_errors(apps.decide))

ledger_app = typer.Typer(
    name="ledger", help="The ledger, on the server's own database.", no_args_is_help=True
)
ledger_app.command("verify")(_one_line_errors(ledger_cli.verify))
admin_app.add_typer(ledger_app, name="ledger")


def main() -> None:
    """Console-script entry point (`cardhour = "cardhour.cli.main:main"`)."""
    app()
