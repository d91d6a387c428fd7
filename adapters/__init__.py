"""Everything around the core, in wings by concern (one subpackage each). Imports flow one way,
from the top of this list to the bottom (siblings on one line import neither way); the
contracts in pyproject.toml say the same and tests/test_house.py checks them:

    cli
    tla
    bench | conformance
    sim | wire | observe
    replay
    runtime
    storage
    client
    protocol | checks
    groupcoord.core
"""
