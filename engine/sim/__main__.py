"""``python -m engine.sim``: run one simulated engine core (options: see ``engine.sim``).

Runs on: the simulator process.
"""

import sys

from engine.sim.engine import main

if __name__ == "__main__":
    sys.exit(main())
