"""``python -m lib.memory train-ntm [--steps S] [--out PATH]``: train the copy model chapter 12 loads.

See :func:`lib.memory.ntm.main` for the options.
"""

from lib.memory.ntm import main

if __name__ == "__main__":
    main()
