"""``python -m pi_hindsight_standin``: the stand-in's command line (see ``cli.py``)."""

from pi_hindsight_standin.cli import main

raise SystemExit(main())
