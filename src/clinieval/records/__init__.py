"""The clinieval.records package (issue 40); see tools/move_engine.py."""
