"""Makes `layer_helpers` (the one layer-contract check) importable by the layer tests."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
