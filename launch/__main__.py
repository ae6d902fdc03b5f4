"""``python -m launch frontend …`` (what ``bin/greenfront`` runs)."""
import sys

from launch.frontend import main

sys.exit(main())
