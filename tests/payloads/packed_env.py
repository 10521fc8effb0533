"""Payload: proves the interpreter and its packages come from the packed environment."""
import os
import sys

import tony_packed_marker  # exists only inside the packed archive

venv = os.path.join(os.getcwd(), "venv")
assert sys.prefix == os.environ["VIRTUAL_ENV"] == venv, (sys.prefix, os.environ.get("VIRTUAL_ENV"), venv)
assert tony_packed_marker.WHERE.startswith(venv), tony_packed_marker.WHERE
print(f"interpreter prefix {sys.prefix}; marker from {tony_packed_marker.WHERE}")
