# Set-up and everyday commands. Everything lives in .venv (and .venv-3.X for the other Pythons); nothing is installed globally.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Every Python the package supports (requires-python): make test runs the suite on each one the machine has,
# .venv's own and, each in its .venv-3.X, the others.
PYTHONS ?= 3.11 3.12 3.13
VENV_VERSION = $(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# $(call python,3.X): python3.X; PYENV_VERSION lets a pyenv shim run it when `pyenv global` names another version.
python = PYENV_VERSION=$(1) python$(1)

.PHONY: install demo demo-flow report-check test suite lint docs bench bench-broad soak frontier cluster-bench bench-processes bench-browser bench-costs bench-ladder bench-outputs bench-files bench-service service-shots clean test-servers

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The dev and docs extras (mkdocs: make docs, and the suite: tests/test_docs_quality.py builds the site) in one pip
# run: one resolution, one editable build with the venv's own setuptools (no isolated build env to fill). Installed
# modules are byte-compiled here, not at import: a dependency's old SyntaxWarning would fail the suite (warnings are errors).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip "setuptools>=77" wheel
	$(BIN)/python -m pip install -q --no-build-isolation -e '.[dev,docs]'
	touch $(STAMP)

install: $(STAMP)

DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	touch $(DOCS_STAMP)

## demo: install, crawl the bundled demo shop, write demo-items.jsonl
demo: $(STAMP)
	$(BIN)/eclaw demo -o demo-items.jsonl

## demo-flow: serve the demo shop and run the example flow (spiders/shop_flow.py) against it
DEMO_PORT ?= 8765
demo-flow: $(STAMP)
	@log=$$(mktemp); $(BIN)/eclaw demo --serve --port $(DEMO_PORT) > $$log 2>&1 & server=$$!; \
	for i in $$(seq 100); do grep -q "demo shop at" $$log && break; sleep 0.1; done; \
	$(BIN)/eclaw flow run spiders/shop_flow.py -a base_url=http://127.0.0.1:$(DEMO_PORT); rc=$$?; \
	kill $$server; rm -f $$log; exit $$rc

## report-check: trace a crawl of the demo shop, render its report, screenshot it in headless Chromium
report-check: $(STAMP)
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	@out=$$(mktemp -d); log=$$out/serve.log; \
	$(BIN)/eclaw demo --serve --port $(DEMO_PORT) > $$log 2>&1 & server=$$!; \
	for i in $$(seq 100); do grep -q "demo shop at" $$log && break; sleep 0.1; done; \
	$(BIN)/eclaw crawl spiders/shop.py -a base_url=http://127.0.0.1:$(DEMO_PORT) -s store= -q \
	  -o $$out/items.jsonl --trace $$out/trace.jsonl > /dev/null; rc=$$?; kill $$server; test $$rc = 0 || exit $$rc; \
	$(BIN)/eclaw report $$out/trace.jsonl -o $$out/report.html && \
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=820,1500 \
	  --screenshot=docs/report.png file://$$out/report.html 2>/dev/null && \
	test $$(stat -c %s docs/report.png) -gt 20000 && echo "report rendered: docs/report.png ($$(stat -c %s docs/report.png) bytes)"

## test: install, lint, type-check, build the docs and run the whole test suite, on every Python of PYTHONS the machine has
# Two phases, each a parallel make: the servers (apt) and every venv install at once; then lint, docs and the suite
# of every Python side by side, each on SUITE_WORKERS processes (the suites wait on servers and subprocesses more
# than they compute: side by side they keep both cores busy, one after the other they leave one idle).
test:
	@$(MAKE) --no-print-directory -j -Orecurse test-servers $(DOCS_STAMP) $(patsubst %,venv-%,$(filter-out $(VENV_VERSION),$(MATRIX)))
	@$(MAKE) --no-print-directory -j -Orecurse lint docs $(patsubst %,suite-%,$(MATRIX))
	@for v in $(filter-out $(MATRIX),$(PYTHONS)); do echo "python$$v not found: skipped"; done

# .venv's Python (the one it will be made from if it is not there yet), and the Pythons of PYTHONS the machine has
VENV_VERSION = $(shell $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
MATRIX = $(foreach v,$(PYTHONS),$(if $(shell $(call python,$(v)) -c "" 2>/dev/null && echo y),$(v)))
venv_of = $(if $(filter $(1),$(VENV_VERSION)),$(VENV),.venv-$(1))
SUITE_WORKERS ?= $(shell nproc)

venv-%:
	@$(MAKE) --no-print-directory VENV=.venv-$* PYTHON="$(call python,$*)" .venv-$*/.docs-installed

# the suite on Python 3.X, in its venv; no pytest cache and a temporary folder of its own: the suites of the
# matrix share the checkout, and pytest's numbered /tmp folders are pruned by whichever session starts next
suite-%:
	@$(MAKE) --no-print-directory suite VENV=$(call venv_of,$*) PYTHON="$(call python,$*)" \
	  TEST_WORKERS=$(SUITE_WORKERS) PYTEST_ARGS="-p no:cacheprovider --basetemp=/tmp/eclaw-suite-$* $(PYTEST_ARGS)"

# The suite alone, in $(VENV) (created and installed as .venv is, from $(PYTHON)), on TEST_WORKERS processes
# (pytest-xdist; a test file stays on one worker, so a module's servers are started once). The tests wait on
# servers and subprocesses more than they compute: one worker more than the machine has cores.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
suite: $(DOCS_STAMP)  # the docs extra too: tests/test_docs_quality.py builds the site
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# Real servers the tests start themselves (a forward proxy, SOCKS servers, Redis, nginx for HTTP/2, a headless Chromium,
# PostgreSQL) and real pages (the Python documentation), from Debian's packages.
test-servers:
	@missing=""; \
	command -v tinyproxy >/dev/null || test -x /usr/bin/tinyproxy || missing="$$missing tinyproxy"; \
	command -v redis-server >/dev/null || test -x /usr/bin/redis-server || missing="$$missing redis-server"; \
	command -v microsocks >/dev/null || test -x /usr/bin/microsocks || missing="$$missing microsocks"; \
	command -v danted >/dev/null || test -x /usr/sbin/danted || missing="$$missing dante-server"; \
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	command -v chromium >/dev/null || test -x /usr/bin/chromium || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	test -d /usr/share/doc/python3-doc || missing="$$missing python3-doc"; \
	command -v dnsmasq >/dev/null || test -x /usr/sbin/dnsmasq || missing="$$missing dnsmasq-base"; \
	if [ -n "$$missing" ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 $$missing) || \
	  (echo "the proxy, SOCKS, Redis, HTTP/2 and browser tests need:$$missing (apt-get install$$missing)" && false); \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

## docs: build the documentation site (mkdocs-material) into site/, strictly: a broken link fails it

docs: $(DOCS_STAMP)
	$(BIN)/python -m tests.sitebuild site  # strict, built once per machine and content, shared with the suites

## bench: eclaw vs Scrapy vs a no-framework baseline on a local nginx site (see bench/)
bench: $(STAMP)
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx) || \
	  echo "nginx could not be installed: the benchmark falls back to an aiohttp server"
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m bench.run $(BENCH_ARGS)

## bench-broad: eclaw vs Scrapy on 1,000 and 10,000 polite hosts (download delay 2 s); BENCH_ARGS="--quick" for a short run
bench-broad: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m bench.broad $(BENCH_ARGS)

## bench-costs: what --trace and --metrics-port (together and each alone), --state and the SQLite store cost, side by side with a plain crawl
bench-costs: $(STAMP)
	$(BIN)/python -m bench.run --contenders eclaw,eclaw-observed,eclaw-traced,eclaw-metrics,eclaw-state,eclaw-nostore \
	  --scaling '' --no-micro \
	  --pages 10000 --repeats 5 --out bench/results/costs.json $(COSTS_ARGS)

## bench-ladder: CPU of the escalation ladder where 5 % of 1,000 pages need the browser, against routing them by hand
bench-ladder: $(STAMP) test-servers
	$(BIN)/python -m bench.ladder $(BENCH_ARGS)

## bench-outputs: a 20,000-page crawl written to a local .jsonl and to s3://…jsonl.gz on a local S3 server, alternated
bench-outputs: $(STAMP)
	$(BIN)/python -m bench.outputs $(BENCH_ARGS)

## bench-files: eclaw's FilesPipeline vs Scrapy's on 1,000 files of 1 MB and one of 1 GB from nginx (about 4 GB in /tmp)
bench-files: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m bench.files $(BENCH_ARGS)

## bench-service: 20 schedules every minute for 10 minutes, 4 crawls at once, a kill -9 of the service halfway
bench-service: $(STAMP)
	$(BIN)/python -m bench.service $(BENCH_ARGS)

## service-shots: screenshots of the service's web UI (docs/service-*.png) in headless Chromium
service-shots: $(STAMP)
	SERVICE_SHOTS=1 $(BIN)/python -m pytest tests/service/test_ui.py -q -p no:cacheprovider

## soak: 10 minutes against an endless local site full of faults, sampling RSS (not in CI)
soak: $(STAMP)
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

## frontier: peak RSS of a crawl that discovers 1,000,000 URLs (the frontier spills to disk)
frontier: $(STAMP)
	$(BIN)/python -m bench.frontier $(FRONTIER_ARGS)

## cluster-bench: the same crawl on 1, 2 and 4 Redis workers against a slow (100 ms) local site
cluster-bench: $(STAMP) test-servers
	$(BIN)/python -m bench.cluster $(CLUSTER_ARGS)

## bench-processes: one CPU-bound crawl on --processes 1 and 2, side by side (PROCESSES_ARGS="--bound": and the coordination-free bound)
bench-processes: $(STAMP) test-servers
	$(BIN)/python -m bench.processes $(PROCESSES_ARGS)

## bench-browser: rendered pages, eclaw's browser fetcher vs Crawlee's PlaywrightCrawler on one local JavaScript site
# Crawlee (npm, pinned in bench/contenders/crawlee/package.json) goes to bench/.cache/crawlee; no browser is downloaded:
# both drive the system's Chromium.
CRAWLEE_DIR := bench/.cache/crawlee
$(CRAWLEE_DIR)/.installed: bench/contenders/crawlee/package.json
	@command -v npm >/dev/null || (echo "bench-browser needs Node 20 and npm" && false)
	mkdir -p $(CRAWLEE_DIR) && cp bench/contenders/crawlee/package.json $(CRAWLEE_DIR)/
	cd $(CRAWLEE_DIR) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error
	touch $@

bench-browser: $(STAMP) $(CRAWLEE_DIR)/.installed
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	$(BIN)/python -m bench.browser $(BROWSER_BENCH_ARGS)

clean:
	rm -rf $(VENV) site .venv-* build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache demo-items.jsonl
