"""A click group whose verbs can be imported when they are used (issue #35).

`faultkit triage` should not import the amplifier's arms and options (13 ms of every start, about a
twentieth of a text triage): a verb added with `add_lazy(name, load)` is a name until click asks for
it (by its name on the command line, or every verb for `--help` and completion), and `load()` then
returns its command, once."""

from __future__ import annotations

from typing import Callable

import click


class LazyGroup(click.Group):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lazy: dict[str, Callable[[], click.Command]] = {}

    def add_lazy(self, name: str, load: Callable[[], click.Command]) -> None:
        self._lazy[name] = load

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        load = self._lazy.pop(name, None)
        if load is not None:
            self.add_command(load(), name)
        return super().get_command(ctx, name)
