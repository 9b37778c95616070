"""The models under test and the judges, behind one interface (generate, log-likelihood, count tokens).

A package of its own so that tasks, runners and benchmarks depend on :class:`.base.Model` alone:
the llama.cpp and OpenAI-compatible HTTP backends, the servers and pools behind them, and the
spec strings that name them (:mod:`.spec`) can change without touching what calls a model.
"""
