import os
import sys

if sys.argv[1:] == ["serve"]:
    # The sidecar as the Pi extension spawns it: straight to its wiring, without click and the
    # command table (issue 19). Anything else goes through the CLI.
    # Pydantic looks for plugins by reading every installed package's entry points when the
    # first model is built (tens of ms in a venv holding the Hindsight server); the sidecar uses
    # none. A value the user set is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from pi_hindsight.errors import PiHindsightError
    from pi_hindsight.serve import serve_pi

    try:
        serve_pi()
    except PiHindsightError as error:  # as the CLI reports it (``cli/main.py``)
        print(f"error: {error.describe()}", file=sys.stderr)
        sys.exit(1)
else:
    from pi_hindsight.cli.main import main

    main()
