"""clinieval: offline, private evaluation of language models on clinical work over patient records."""

__version__ = "0.1.0"
