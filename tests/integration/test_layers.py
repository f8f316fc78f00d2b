"""The layers hold for the database too: between two apps, foreign keys run one way; and
each points at a model of the same package or of one below it (the order of pyproject.toml's
import-linter layers contract), but for one sanctioned exception: the chat session a row was
started from (agents, runs, sweeps, research loops keep `chat_session`). A chat is the scope
those rows belong to, as a project is; the code below reaches it only through the foreign key
(`_meta.get_field("chat_session").related_model`), never by importing sessions_app."""

import tomllib

from django.apps import apps

from tests.helpers import REPO

SANCTIONED_UPWARD = {"sessions_app.ChatSession"}


def _layers() -> list[list[str]]:
    """The contract's layers, top first; each a list of the packages side by side in it
    (import-linter's "a | b")."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    [layers] = [
        contract["layers"]
        for contract in config["tool"]["importlinter"]["contracts"]
        if contract["type"] == "layers"
    ]
    return [[name.strip() for name in layer.split("|")] for layer in layers]


def _foreign_keys() -> list[tuple[str, str, str]]:
    """(model label, field name, target model label) of the project's concrete relations."""
    layers = {name for layer in _layers() for name in layer}
    found = []
    for model in apps.get_models():
        if model._meta.app_label not in layers:
            continue
        for field in model._meta.get_fields():
            if field.is_relation and field.concrete and field.related_model:
                found.append((model._meta.label, field.name, field.related_model._meta.label))
    assert len(found) > 20  # the project's foreign keys were found
    return found


def _app(label: str) -> str:
    return label.split(".")[0]


def test_every_foreign_key_points_down_the_layers():
    rank = {name: position for position, layer in enumerate(_layers()) for name in layer}
    upward = [
        f"{model}.{name} -> {target}"
        for model, name, target in _foreign_keys()
        if _app(target) in rank
        and rank[_app(target)] < rank[_app(model)]
        and target not in SANCTIONED_UPWARD
    ]
    assert not upward, f"foreign keys to a layer above: {upward}"


def test_between_two_apps_foreign_keys_run_one_way():
    directions = {
        (_app(model), _app(target))
        for model, _, target in _foreign_keys()
        if _app(model) != _app(target)
    }
    both_ways = sorted((a, b) for a, b in directions if (b, a) in directions and a < b)
    assert not both_ways, f"apps whose foreign keys point at each other: {both_ways}"
