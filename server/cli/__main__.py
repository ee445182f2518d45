"""``python -m server.cli``: the same as the ``fairjudge`` command."""

from server.cli import main

main()
