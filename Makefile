# kvorum build and test entry points. `make test` is what CI runs (.ci/run).

GO           ?= go
BIN          ?= bin/kvorum
# Version stamped into the binary (main.version); empty keeps the source's.
VERSION      ?=
LDFLAGS      := -s -w $(if $(VERSION),-X main.version=$(VERSION))

TEST_TIMEOUT ?= 20m
RACE_TIMEOUT ?= 30m
# Packages with concurrency worth running under the race detector, with
# -short: the slowest single-threaded comparisons against redis-server skip
# there (they run in `make unit`).
RACE_PKGS    ?= ./internal/acl/... ./internal/transport/... ./internal/resp/... ./internal/store/... ./internal/server/... ./internal/script/... ./internal/reccache/... ./pkg/...
# Fuzz targets, as FuzzName:package; each runs for FUZZTIME.
FUZZ         ?= FuzzParse:./internal/resp/codec FuzzCommands:./internal/kv FuzzRules:./internal/acl FuzzACLFile:./internal/acl FuzzDecodeDump:./internal/rdb FuzzReader:./internal/rdb
FUZZTIME     ?= 10s
# The torture sweep of `make test`: this many 3-node seeds and a third as
# many 5-node ones, starting at TORTURE_FIRST (go test ./... runs a smaller
# sweep from seed 1). See docs/reliability.md. 60 keeps `make test` within
# CI's 25 minutes on a 2-core machine; `make torture TORTURE_SEEDS=500`
# for a longer sweep.
TORTURE_SEEDS ?= 60
TORTURE_FIRST ?= 1000
# `make image`: the image's name (tagged <version> and latest) and its
# build context (the binary and an empty data directory; see Dockerfile).
IMAGE        ?= kvorum
IMAGE_DIR    ?= bin/image
# Extra arguments for `make demo`, e.g. make demo DEMO_ARGS="--nodes 5".
DEMO_ARGS    ?=

# The steps of `make test` must run in order.
.NOTPARALLEL:

.PHONY: help test deps vet unit race torture fuzz build image demo clean

help:
	@echo "make test    vet, unit and cluster tests, -race on RACE_PKGS, a short fuzz run"
	@echo "             (installs redis-server and gcc with apt-get if missing)"
	@echo "make build   static binary in $(BIN) (VERSION=x.y.z to stamp a version)"
	@echo "make image   container image $(IMAGE):<version> and $(IMAGE):latest (needs docker)"
	@echo "make demo    run a local 3-node cluster (DEMO_ARGS=\"--nodes 5\")"
	@echo "make torture fault-injection sweep (TORTURE_SEEDS=$(TORTURE_SEEDS)); docs/reliability.md"
	@echo "make vet | unit | race | fuzz | deps | clean"

test: deps vet unit race torture fuzz

deps:
	@scripts/ensure-test-deps.sh

vet:
	$(GO) vet ./...

unit:
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

race:
	CGO_ENABLED=1 $(GO) test -race -short -timeout $(RACE_TIMEOUT) $(RACE_PKGS)

torture:
	$(GO) test -count=1 -timeout 20m -run 'TestTorture$$' ./internal/torture \
		-torture.seeds $(TORTURE_SEEDS) -torture.first $(TORTURE_FIRST)

fuzz:
	scripts/fuzz.sh $(GO) $(FUZZTIME) $(FUZZ)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/kvorum

# The version label and tag are what the binary reports (`kvorum version`);
# '+' is not allowed in a tag.
image: build
	rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)/data && cp $(BIN) $(IMAGE_DIR)/kvorum
	v=$$($(BIN) version | sed -n '1s/^kvorum //p' | tr + -) && test -n "$$v" && \
	docker build --build-arg VERSION=$$v -t $(IMAGE):$$v -t $(IMAGE):latest -f Dockerfile $(IMAGE_DIR)

demo:
	$(GO) run ./cmd/kvorum demo $(DEMO_ARGS)

clean:
	rm -rf bin
