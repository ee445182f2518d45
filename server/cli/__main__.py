"""``python -m server.cli``: the same as the ``fairjudge`` command."""

from server.cli import main

# Guarded: a process started with multiprocessing's spawn (the web process's figure
# computations, server/kept/serving.py) imports this module again under another name.
if __name__ == "__main__":
    main()
