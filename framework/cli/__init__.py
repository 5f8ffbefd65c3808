"""The ``outrigger`` command line: one module per family of commands (:mod:`.serve`, :mod:`.apply`,
:mod:`.get`, :mod:`.explain`, :mod:`.watch`, :mod:`.demo`), each registering its commands with
:func:`~framework.cli.registry.command`; :mod:`.app` builds the parser from them and runs one
(:func:`main`, the ``outrigger`` console script and ``python -m framework.cli``)."""

from .app import main, parser, version
from .configfiles import config_warnings
from .registry import COMMANDS, Command, command

__all__ = ["COMMANDS", "Command", "command", "config_warnings", "main", "parser", "version"]
