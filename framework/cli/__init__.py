"""The ``outrigger`` command line: one module per family of commands (:mod:`.serve`, :mod:`.apply`,
:mod:`.get`, :mod:`.explain`, :mod:`.watch`, :mod:`.demo`), each registering its commands with
:func:`~framework.cli.registry.command`; :mod:`.app` builds the parser from them and runs one
(:func:`main`, the ``outrigger`` console script and ``python -m framework.cli``).

What the commands share: :mod:`.flags` (``--server``, ``-f``, ``-n``, ``-o``), :mod:`.security` (the
``--tls-*``, ``--token-file`` and ``--framework-*`` flags), :mod:`.output`, :mod:`.configfiles` and
:mod:`.progress` (the terminal progress bar); :mod:`.demorun` is what ``outrigger demo`` runs (the
generated cluster, the example plugin hosts, the summary)."""

from .app import main, parser, version
from .configfiles import config_warnings
from .registry import COMMANDS, Command, command

__all__ = ["COMMANDS", "Command", "command", "config_warnings", "main", "parser", "version"]
