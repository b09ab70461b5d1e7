PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= $(abspath ../shared/data)
export PROTOEMBED_DATA ?= $(DATA)
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# mkdocs-material's notice about MkDocs 2 on every build: not about this site.
export NO_MKDOCS_2_WARNING ?= 1

.PHONY: install demo test lint bench clean docs docs-serve docs-screenshots

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned to the CPU build on this machine; an unpinned torch would pull a CUDA build.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	@echo "make: installing torch 2.13 (CPU build) into $(VENV) ..."
	$(BIN)/pip install -q torch==2.13.0
	@echo "make: installing protoembed and its dependencies into $(VENV) ..."
	$(BIN)/pip install -q -e '.[dev,onnx,openvino]'
	touch $@

install: $(VENV)/.installed

demo: install
	@echo "make demo: STS12-16, STS-B and SICK-R of the default model on SentEval's copy (18,850 pairs) ..."
	$(BIN)/protoembed eval sts --model default --variant senteval
	@echo "make demo: the same tasks on the raw (cased) originals ..."
	$(BIN)/protoembed eval sts --model default --variant raw

lint: install
	$(BIN)/ruff check src tests benchmarks experiments docs/hooks
	$(BIN)/ruff format --check src tests benchmarks experiments docs/hooks

# The full suite (what CI runs): pyproject's testpaths, the library's tests and the experiments'
# (experiments/tests: the studies and the pages they write); the 15 slowest tests are listed at the end.
# The documentation site's strict build is one of them (tests/test_docs_site.py).
test: install lint $(VENV)/hub1-clients/.installed
	$(BIN)/python -m pytest -q

# langchain-huggingface, a client the server's tests answer (tests/test_serve_langchain_hf.py): every release
# requires huggingface-hub < 2, the main install's transformers >= 2.4, so the two sit in a side install that
# the test's child interpreter puts first (benchmarks/side_install.py).
$(VENV)/hub1-clients/.installed: $(VENV)/.installed
	$(BIN)/pip install -q --no-deps --target $(VENV)/hub1-clients 'langchain-huggingface>=1.2,<2' \
	  'huggingface-hub>=1.0,<2'
	touch $@

# The documentation site (mkdocs.yml) into site/, strict: a warning (a broken link, a docstring griffe cannot
# read) fails it. The API reference is read from src/, the CLI reference generated from the parsers.
docs: install
	$(BIN)/mkdocs build --strict

# The site on http://127.0.0.1:8000, rebuilt when docs/, mkdocs.yml or src/ change.
docs-serve: install
	$(BIN)/mkdocs serve --strict

# Screenshots of the built site (headless Chromium) into site-screenshots/, to check how pages render.
docs-screenshots: docs
	$(BIN)/python docs/hooks/screenshots.py

# The edit loop: no default backbone, no benchmark data, no spawned interpreters.
.PHONY: test-fast
test-fast: install
	$(BIN)/python -m pytest -q -m "not backbone and not data and not subprocess"

# sentence-transformers' ONNX rows of the benchmark run sentence-transformers 5 + optimum-onnx from a side
# install (optimum-onnx's only release needs transformers < 4.58; sentence-transformers 6 needs >= 5).
$(VENV)/st-onnx/.installed: $(VENV)/.installed
	$(BIN)/pip install -q --no-deps --target $(VENV)/st-onnx 'sentence-transformers>=5.5,<6' \
	  'transformers>=4.51,<4.58' 'tokenizers>=0.21,<0.23' 'huggingface-hub>=0.34,<1.0' 'optimum>=2.1,<2.2' \
	  'optimum-onnx>=0.1,<0.2' 'requests>=2.31,<3' 'urllib3>=1.21,<3' 'idna>=2.5,<4' 'charset-normalizer>=2,<4' \
	  'certifi>=2023.5'
	touch $@

# sentence-transformers' OpenVINO rows: sentence-transformers 5 + optimum-intel, whose release needs
# transformers < 5.6 and optimum 2.3 (optimum-onnx above needs optimum < 2.2): a second side install.
# openvino and nncf come from the main install's [openvino] extra.
$(VENV)/st-openvino/.installed: $(VENV)/.installed
	$(BIN)/pip install -q --no-deps --target $(VENV)/st-openvino 'sentence-transformers>=5.5,<6' \
	  'transformers>=4.51,<4.58' 'tokenizers>=0.21,<0.23' 'huggingface-hub>=0.34,<1.0' 'optimum>=2.3,<2.4' \
	  'optimum-intel>=2.2,<2.3' 'optimum-onnx>=0.1,<0.2' 'requests>=2.31,<3' 'urllib3>=1.21,<3' 'idna>=2.5,<4' \
	  'charset-normalizer>=2,<4' 'certifi>=2023.5'
	touch $@

.PHONY: bench-env
bench-env: $(VENV)/st-onnx/.installed $(VENV)/st-openvino/.installed

# benchmarks/serve.py's Infinity rows: infinity-emb 0.0.78 with its server and its two CPU engines (torch:
# sentence-transformers 3; optimum: ONNX Runtime) in a venv of its own (it pins transformers < 5, the main
# install has 5). torch first, pinned to the CPU build, so that infinity-emb's torch requirement is met by it;
# the rest pinned to the releases measured (optimum 1.x, which Infinity's ONNX graph optimisation was written
# for, does not import with torch 2.13: benchmarks/serve.py runs that optimisation itself).
$(VENV)/infinity/.installed:
	$(PY) -m venv $(VENV)/infinity
	$(VENV)/infinity/bin/pip install -q torch==2.13.0
	$(VENV)/infinity/bin/pip install -q 'infinity-emb[server,optimum,torch]==0.0.78' 'transformers>=4.57,<4.58' \
	  'sentence-transformers>=3.4,<3.5' 'optimum>=2.1,<2.2' 'optimum-onnx>=0.1,<0.2'
	touch $@

.PHONY: bench-serve-env bench-serve
bench-serve-env: $(VENV)/infinity/.installed

# protoembed serve against Infinity and a naive server (about 10 minutes); encode_corpus.py needs no side install.
bench-serve: install bench-serve-env
	$(BIN)/python benchmarks/serve.py

# The sentence-transformers rows run in workers that see the side install and only the main packages that do not
# depend on it (benchmarks/side_install.py: the main datasets needs a newer huggingface-hub than the side's).
bench: install bench-env
	$(BIN)/python benchmarks/encode.py --runs 3

# Every benchmark's --smoke run (a tiny random model, a few inputs; the figures mean nothing) and gpu_check.sh's
# checks: what make test runs of benchmarks/.
.PHONY: bench-smoke
bench-smoke: install
	$(BIN)/python -m pytest -q tests/test_benchmarks_smoke.py tests/test_bench_gpu_check.py

# The data benchmarks/gpu_check.sh reads, copied into .gpu-data/ (ignored) for a GPU machine that does not see
# $(DATA); there: benchmarks/gpu_check.sh --data .gpu-data
.PHONY: gpu-data
gpu-data: install
	PYTHON=$(BIN)/python benchmarks/stage_gpu_data.sh $(DATA)

# SentEval transfer tasks on the default model: table + JSON (encoding its ~108k distinct sentences takes most of the time;
# --runtime onnx: an fp32 ONNX export of the model, made once and cached, gives the torch vectors to ~1e-7).
.PHONY: eval-transfer
eval-transfer: install
	$(BIN)/protoembed eval transfer --model default --runtime onnx --output docs/results/transfer-default.json

# Few-shot transfer on the default model (16 per class, 10 seeds; 2 to 5 min): table, JSON, violin plot.
.PHONY: eval-fewshot
eval-fewshot: install
	$(BIN)/protoembed eval fewshot --model default --output docs/results/fewshot-default.json --figure docs/results/fewshot-default.png

# The ConPVP paper's analysis figures (Figs. 4-6) for the default model (about 1.5 min): PNG + JSON each.
.PHONY: analyze
analyze: install
	$(BIN)/protoembed analyze similarity --model default --figure docs/results/analysis-similarity.png --output docs/results/analysis-similarity.json
	$(BIN)/protoembed analyze frequent-tokens --model default --figure docs/results/analysis-frequent-tokens.png --output docs/results/analysis-frequent-tokens.json
	$(BIN)/protoembed analyze tsne --model default --figure docs/results/analysis-tsne.png --output docs/results/analysis-tsne.json

# Short-text clustering on the default model (about 6 min on 2 CPU cores): table + JSON.
.PHONY: eval-clustering
eval-clustering: install
	$(BIN)/protoembed eval clustering --model default --output docs/results/clustering-default.json

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache site site-screenshots

# Unsupervised CPU study (experiments/unsup_cpu.py): configs/cpu x seeds 1-3 -> runs/unsup-cpu/
# (weights, ignored), docs/results/unsup-cpu/<run>/ (each run's results, config, log and environment,
# committed) and the report docs/results/unsup-cpu.md + .png. Resumable: rerun to continue; recorded
# runs are skipped. One method: $(BIN)/python experiments/unsup_cpu.py --methods conpvp-official
# --suites: transfer, few-shot and clustering of the untrained model and of every seed of ConPVP (paper)
# and SimCSE (--suite-methods all: every method), and Figs. 4-7; --dims: the STS test at every Matryoshka
# width of the untrained model and of SimCSE, ConPVP (paper) and ConPVP + Matryoshka; --sklearn-transfer:
# transfer with scikit-learn's classifier too, on the --suites models; a missing kept model is retrained.
.PHONY: experiment-unsup
experiment-unsup: install
	$(BIN)/python experiments/unsup_cpu.py --suites transfer fewshot clustering --dims --sklearn-transfer

# The supervised CPU study (Table I systems on the default backbone, seeds 1-3, STS-B one epoch; the
# cross-encoder's STS-B its configs' 3 epochs, where its dev curve stops improving): resumable; writes
# docs/results/supervised-cpu.md and its figure from the run records.
.PHONY: experiment-supervised
experiment-supervised: install
	$(BIN)/python experiments/supervised_cpu.py --seeds 1 2 3 --systems sbert cnn-sbert simcse-sup --set training.epochs=1
	$(BIN)/python experiments/supervised_cpu.py --seeds 1 2 3 --systems cross-encoder cross-encoder-bce

# Domain adaptation study (experiments/domain_adapt.py): SimCSE and ConPVP trained on the texts of
# StackOverflow, Biomedical and Tweet (labels never read; configs/cpu/adapt), seeds 1-3, each then
# clustered on its set -> docs/results/domain-adaptation/<run>/ and docs/results/domain-adaptation.md.
# Resumable: rerun to continue; recorded runs are skipped.
.PHONY: experiment-adapt
experiment-adapt: install
	$(BIN)/python experiments/domain_adapt.py

.PHONY: experiment-own-pairs
experiment-own-pairs: install
	$(BIN)/python experiments/own_pairs.py

.PHONY: experiment-smaller-vectors
experiment-smaller-vectors: install
	$(BIN)/python experiments/smaller_vectors.py
