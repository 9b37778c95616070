"""``python -m clinieval.models.selfcheck``: load the embedded SmolLM2 and decode two tokens.

pip reuses a llama-cpp-python wheel from its cache whatever ``CMAKE_ARGS`` say now, so a wheel
built for another CPU (a native build on a machine with AMX, for instance) can be installed on a
machine where its first decode crashes. ``make install`` runs this check and rebuilds without the
cache when it fails; a crash here (exit status from a signal) is what it looks for.
"""

from __future__ import annotations


def main() -> None:
    from llama_cpp import Llama

    from clinieval.models.catalog import EMBEDDED

    llm = Llama(model_path=str(EMBEDDED[0].locate()), n_ctx=256, verbose=False)
    llm.create_completion(llm.tokenize(b"The patient"), max_tokens=2, temperature=0.0)
    print("llama.cpp decodes with the embedded model")


if __name__ == "__main__":
    main()
