"""The clinieval.engine package (issue 40); see tools/move_engine.py."""
