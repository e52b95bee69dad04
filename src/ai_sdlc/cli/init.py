"""placeholder during bootstrap"""

import typer


def register(app: typer.Typer) -> None:
    pass
