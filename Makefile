# agent-sandbox-server: one non-recursive Makefile, sources by wildcard.
#
#   make          the static, stripped binary build/agent-sandbox-server
#   make check    unit tests (ASan + UBSan, host compiler; the threaded ones
#                 again under ThreadSanitizer), then integration tests
#                 against the static binary
#   make run      build, then serve on 127.0.0.1:9000 with embedded defaults
#   make fuzz     each libFuzzer target for FUZZ_SECONDS
#   make bench    side-by-side figures against the tools a user would use
#   make size     binary size and the largest contributors
#   make e2e      opt-in tests that reach the real npm registry
#   make install  PREFIX=/usr/local DESTDIR=
#   make ARCH=arm64      the same binary for aarch64, cross-built (musl
#                 too, from its pinned source) into build/arm64
#   make check-arm64     integration tests against the arm64 binary, under
#                 qemu-aarch64-static (no binfmt needed)
#   make release  dist/: both binaries, their CycloneDX SBOMs, SHA256SUMS
#   make check-release   builds the release twice (another directory, time,
#                 time zone) and compares the bytes
#
# B= moves the build directory (default build, build/arm64 for ARCH=arm64).

VERSION := 0.1.0
ARCH ?= x64
# the names uname -m and Debian give them too (ARCH is often in the environment)
override ARCH := $(patsubst x86_64,x64,$(patsubst amd64,x64,$(patsubst aarch64,arm64,$(ARCH))))
ifeq ($(filter x64 arm64,$(ARCH)),)
$(error ARCH=$(ARCH): unknown (known: x64, arm64))
endif
ifeq ($(ARCH),arm64)
ifneq ($(filter check unit integration run fuzz bench e2e size,$(MAKECMDGOALS)),)
$(error make $(filter check unit integration run fuzz bench e2e size,$(MAKECMDGOALS)) runs on this machine's build: with ARCH=arm64 only the binary is built (make check-arm64 tests it))
endif
B ?= build/arm64
DEPS ?= $(B)/deps
# The wrapper around aarch64-linux-gnu-gcc that tools/deps.sh installs with
# the musl it builds.
MUSL_CC := $(abspath $(DEPS))/musl/bin/musl-gcc
else
B ?= build
DEPS ?= $(B)/deps
MUSL_CC ?= musl-gcc
endif
DIST ?= dist
MUSL := $(DEPS)/musl
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 60
SAN_CC ?= clang
# The build date is the commit's (or SOURCE_DATE_EPOCH's, reproducible-builds.org),
# in UTC, so two builds of one commit agree whatever the clock or time zone says.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
export SOURCE_DATE_EPOCH
BUILD_DATE := $(shell date -u -d @$(or $(SOURCE_DATE_EPOCH),$(shell date +%s)) +%Y-%m-%d)

BIN := $(B)/agent-sandbox-server
CORE_SRC := $(sort $(wildcard core/*/*.c))
APPLET_SRC := $(sort $(wildcard applets/*.c))
MANIFESTS := $(sort $(wildcard manifests/*.json manifests/*/*.json))
HELP := $(sort $(wildcard applets/help/*.txt))
GEN_SRC := $(B)/gen/manifests_embed.c
# The applets' --help texts, linked into the binary only (applets/opts.c).
HELP_SRC := $(B)/gen/help_embed.c
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
# Header dependencies come from the compiler (-MMD: a .d file beside each
# object, read back below); the generated headers must exist before the
# first compile, and every object is rebuilt when this Makefile changes
# (its flags may have).
DEPFLAGS := -MMD -MP
GEN_HDRS := $(B)/gen/deps_version.h

WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wpointer-arith -Wvla
DEFS := -D_GNU_SOURCE -DABX_VERSION='"$(VERSION)"' -DABX_BUILD_DATE='"$(BUILD_DATE)"'
INCS := -Icore -Iapplets -I$(B)/gen

# Release: musl, static, size-optimised, stripped. No directory of the build
# in the bytes (the prefix maps: __FILE__ of generated sources) and no build
# id, so two checkouts build the same file. Link-time optimisation over our
# objects (the libraries are plain objects) saves about 10 KB; `make size`
# then shows our code as LTO partitions, not per object. -ffat-lto-objects:
# GCC's late warnings (-Wformat-truncation, which -Wall turns on, and the
# other value-range ones) run only where code is generated, which with bare
# -flto is the link, where they are not issued; fat objects generate code
# at compile time too (the link still uses the IR: the same binary). The
# unit build's clang 14 has no -Wformat-truncation, so this is its one check.
# -Oz rather than -Os (4 KB; the hot loops are in the libraries, built
# apart). At the link, one LTO partition and interprocedural points-to
# analysis let GCC see the whole program at once (1.6 KB of code; a
# 12-second link).
REL_CFLAGS := -std=c11 -Oz -flto=auto -ffat-lto-objects -fno-asynchronous-unwind-tables -ffunction-sections -fdata-sections \
	-fstack-protector-strong -D_FORTIFY_SOURCE=2 $(DEPFLAGS) $(WARN) $(DEFS) $(INCS) -I$(MUSL)/include \
	-ffile-prefix-map=$(CURDIR)/= -ffile-prefix-map=$(abspath $(B))/=build/ -ffile-prefix-map=$(B)/=build/
REL_LDFLAGS := -static -s -flto-partition=one -fipa-pta -Wl,--gc-sections -Wl,-z,noexecstack -Wl,-z,relro -Wl,-z,now -Wl,--build-id=none
REL_LIBS := -L$(MUSL)/lib -larchive -lz -lbearssl -lpthread

# Sanitizer build for unit tests and fuzzing: host compiler, Debian -dev packages.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_CFLAGS := -std=c11 -g -O1 $(SAN_FLAGS) $(DEPFLAGS) $(WARN) $(DEFS) -DABX_TEST=1 $(INCS) -I/usr/include/bearssl
SAN_LIBS := -larchive -lz -lbearssl -lcmocka -lpthread

REL_OBJ := $(patsubst %.c,$(B)/rel/%.o,$(CORE_SRC) $(APPLET_SRC)) $(B)/rel/gen/manifests_embed.o \
	$(B)/rel/gen/help_embed.o
SAN_OBJ := $(patsubst %.c,$(B)/san/%.o,$(CORE_SRC)) $(B)/san/gen/manifests_embed.o
FUZZ_OBJ := $(patsubst %.c,$(B)/fuzzobj/%.o,$(CORE_SRC)) $(B)/fuzzobj/gen/manifests_embed.o
UNIT_BIN := $(patsubst tests/unit/%.c,$(B)/unit/%,$(UNIT_SRC))
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))

# ThreadSanitizer: the unit tests whose code runs threads (the server, its
# workers and runners, sessions, jobs, parallel installs), part of make check.
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
TSAN_CFLAGS := -std=c11 -g -O1 $(TSAN_FLAGS) $(DEPFLAGS) $(WARN) $(DEFS) -DABX_TEST=1 $(INCS) -I/usr/include/bearssl
TSAN_TESTS := test_api test_arc test_tokfile test_api_ops test_api_sessions test_cache test_httpd test_install test_install_npm test_journal_reserve test_npm test_proc test_sessions
TSAN_OBJ := $(patsubst %.c,$(B)/tsan/%.o,$(CORE_SRC)) $(B)/tsan/gen/manifests_embed.o
TSAN_BIN := $(patsubst %,$(B)/tsan/%.tsan,$(TSAN_TESTS))

.PHONY: all deps hostdeps check unit integration run fuzz bench size e2e install clean distclean \
	check-arm64 release check-release
all: $(BIN)

# Every object is named as a prerequisite here, so none counts as
# intermediate: make neither deletes one after a build (every `make check`
# recompiled them) nor skips rebuilding one that is missing (a bare
# `.SECONDARY:` did both the first and the second).
$(UNIT_BIN): $(SAN_OBJ)
$(FUZZ_BIN): $(FUZZ_OBJ)
$(TSAN_BIN): $(TSAN_OBJ)

hostdeps:
	@tools/hostdeps.sh build-$(ARCH)

$(MUSL)/lib/libarchive.a: tools/deps.pins tools/deps.sh
	@tools/hostdeps.sh build-$(ARCH)
	ARCH=$(ARCH) DEPS=$(abspath $(DEPS)) tools/deps.sh
	@touch $@

deps: $(MUSL)/lib/libarchive.a

# After the deps: on a fresh machine hostdeps installs musl-dev there, and a
# header written before it recorded an empty musl version. x64 links the
# host's musl-dev; arm64 the musl built from its pin.
$(B)/gen/deps_version.h: tools/deps.pins | $(MUSL)/lib/libarchive.a
	@mkdir -p $(@D)
	@awk '$$1=="zlib"{z=$$2} $$1=="bearssl"{b=$$2} $$1=="libarchive"{a=$$2} END{ \
	  printf "#define DEP_ZLIB \"%s\"\n#define DEP_BEARSSL \"%s\"\n#define DEP_LIBARCHIVE \"%s\"\n", z, b, a}' $< >$@.tmp
	@v=$$($(if $(filter arm64,$(ARCH)),awk '$$1=="musl"{print $$2; exit}' $<,dpkg-query -W -f '$${Version}' musl-dev 2>/dev/null)); \
	  [ -n "$$v" ] || { echo "$@: musl-dev is not installed: run make hostdeps" >&2; exit 1; }; \
	  printf '#define DEP_MUSL "%s"\n' "$$v" >>$@.tmp
	@mv $@.tmp $@

$(GEN_SRC): tools/embed.sh $(MANIFESTS)
	@mkdir -p $(@D)
	@tools/embed.sh manifests embedded_manifests json >$@.tmp && mv $@.tmp $@

# The directory too: a text removed or added changes its time.
$(HELP_SRC): tools/embed.sh applets/help $(HELP)
	@mkdir -p $(@D)
	@tools/embed.sh applets/help embedded_help txt >$@.tmp && mv $@.tmp $@

$(B)/rel/%.o: %.c Makefile $(MUSL)/lib/libarchive.a | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(MUSL_CC) $(REL_CFLAGS) -c $< -o $@

$(B)/rel/gen/manifests_embed.o: $(GEN_SRC) Makefile $(MUSL)/lib/libarchive.a | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(MUSL_CC) $(REL_CFLAGS) -c $< -o $@

$(B)/rel/gen/help_embed.o: $(HELP_SRC) Makefile $(MUSL)/lib/libarchive.a | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(MUSL_CC) $(REL_CFLAGS) -c $< -o $@

$(BIN): $(REL_OBJ) $(MUSL)/lib/libarchive.a
	$(MUSL_CC) $(REL_CFLAGS) $(REL_LDFLAGS) $(REL_OBJ) $(REL_LIBS) -o $@
	@echo "$@: $$(stat -c %s $@) bytes (budget 1048576; make size says what takes the room)"

# The test build: the release's objects, except that the files holding a
# test hook (#ifdef ABX_TEST_HOOKS: ABX_TEST_PAUSE) are compiled again with
# the hooks on. Only the integration tests that need a hook run it
# ($BIN_HOOKS, tests/lib.sh); the release binary carries none
# (tests/integration/static.sh looks). Two files, not a second build.
HOOK_SRC := $(shell grep -l ABX_TEST_HOOKS $(CORE_SRC) $(APPLET_SRC))
TEST_BIN := $(B)/test/agent-sandbox-server
TEST_OBJ := $(filter-out $(patsubst %.c,$(B)/rel/%.o,$(HOOK_SRC)),$(REL_OBJ)) \
	$(patsubst %.c,$(B)/testrel/%.o,$(HOOK_SRC))

$(B)/testrel/%.o: %.c Makefile $(MUSL)/lib/libarchive.a | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(MUSL_CC) $(REL_CFLAGS) -DABX_TEST_HOOKS=1 -c $< -o $@

$(TEST_BIN): $(TEST_OBJ) $(MUSL)/lib/libarchive.a
	@mkdir -p $(@D)
	$(MUSL_CC) $(REL_CFLAGS) $(REL_LDFLAGS) $(TEST_OBJ) $(REL_LIBS) -o $@

# The same link, unstripped, with a map: what `make size` reads.
$(BIN).debug: $(REL_OBJ) $(MUSL)/lib/libarchive.a
	$(MUSL_CC) $(REL_CFLAGS) $(filter-out -s,$(REL_LDFLAGS)) -Wl,-Map,$@.map $(REL_OBJ) $(REL_LIBS) -o $@

$(B)/san/%.o: %.c Makefile | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(SAN_CC) $(SAN_CFLAGS) -c $< -o $@

$(B)/san/gen/manifests_embed.o: $(GEN_SRC) Makefile | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(SAN_CC) $(SAN_CFLAGS) -c $< -o $@

$(B)/unit/%: tests/unit/%.c $(SAN_OBJ)
	@mkdir -p $(@D)
	$(SAN_CC) $(SAN_CFLAGS) -Wno-unused-function $< $(SAN_OBJ) $(SAN_LIBS) -o $@

$(B)/fuzzobj/%.o: %.c Makefile | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(SAN_CC) $(SAN_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/fuzzobj/gen/manifests_embed.o: $(GEN_SRC) Makefile | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(SAN_CC) $(SAN_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@mkdir -p $(@D)
	$(SAN_CC) $(SAN_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJ) $(SAN_LIBS) -o $@

$(B)/tsan/%.o: %.c Makefile | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(SAN_CC) $(TSAN_CFLAGS) -c $< -o $@

$(B)/tsan/gen/manifests_embed.o: $(GEN_SRC) Makefile | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(SAN_CC) $(TSAN_CFLAGS) -c $< -o $@

$(B)/tsan/%.tsan: tests/unit/%.c $(TSAN_OBJ)
	@mkdir -p $(@D)
	$(SAN_CC) $(TSAN_CFLAGS) -Wno-unused-function $< $(TSAN_OBJ) $(SAN_LIBS) -o $@

-include $(wildcard $(B)/rel/*/*.d $(B)/rel/*/*/*.d $(B)/testrel/*/*/*.d $(B)/san/*/*.d $(B)/san/*/*/*.d \
	$(B)/fuzzobj/*/*.d $(B)/fuzzobj/*/*/*.d $(B)/tsan/*/*.d $(B)/tsan/*/*/*.d $(B)/tsan/*.d \
	$(B)/unit/*.d $(B)/fuzz/*.d)

# make unit: the unit tests only (ASan+UBSan, then the threaded ones under
# ThreadSanitizer); make integration: the integration tests only; make
# check: both.
unit:
	@tools/hostdeps.sh check
	@$(MAKE) --no-print-directory $(UNIT_BIN) $(TSAN_BIN)
	@tests/run.sh --no-integration $(UNIT_BIN) $(TSAN_BIN)

integration:
	@tools/hostdeps.sh check
	@$(MAKE) --no-print-directory $(BIN) $(TEST_BIN)
	@tests/run.sh

check:
	@tools/hostdeps.sh check
	@$(MAKE) --no-print-directory $(BIN) $(TEST_BIN) $(UNIT_BIN) $(TSAN_BIN)
	@tests/run.sh $(UNIT_BIN) $(TSAN_BIN)

run:
	@tools/hostdeps.sh build
	@$(MAKE) --no-print-directory $(BIN)
	@tools/run.sh $(BIN)

fuzz:
	@tools/hostdeps.sh check
	@$(if $(FUZZ_BIN),$(MAKE) --no-print-directory $(FUZZ_BIN))
	@tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

bench:
	@tools/hostdeps.sh bench
	@$(MAKE) --no-print-directory $(BIN)
	@tools/bench.sh $(BIN)

size: $(BIN) $(BIN).debug
	@tools/size.sh $(BIN) $(BIN).debug $(REL_OBJ)

# The arm64 binary under qemu-aarch64-static: the integration files named
# here run unchanged, BIN being a wrapper that starts the emulator (argv[0]
# passed on, so the applet links dispatch; tests/lib.sh runs the binary's own
# links through it too), plus tests/arm64/*.sh.
ARM64_TESTS := dispatch healthcheck fetch install
ARM64_B := $(if $(filter arm64,$(ARCH)),$(B),$(B)/arm64)
check-arm64:
	@tools/hostdeps.sh check-arm64
	@$(MAKE) --no-print-directory ARCH=arm64 B=$(ARM64_B) all $(ARM64_B)/test/agent-sandbox-server
	@q=$$(command -v qemu-aarch64-static) && w=$(abspath $(ARM64_B))/qemu/agent-sandbox-server && \
	  wh=$(abspath $(ARM64_B))/qemu/test/agent-sandbox-server && mkdir -p $(ARM64_B)/qemu/test && \
	  printf '#!/bin/sh\nexec %s -0 "$$0" %s "$$@"\n' "$$q" $(abspath $(ARM64_B))/agent-sandbox-server >$$w && \
	  printf '#!/bin/sh\nexec %s -0 "$$0" %s "$$@"\n' "$$q" $(abspath $(ARM64_B))/test/agent-sandbox-server >$$wh && \
	  chmod +x $$w $$wh && \
	  ABX_TEST_BIN=$$w ABX_TEST_SELF=$(abspath $(ARM64_B))/agent-sandbox-server ABX_TEST_EMULATOR=$$q \
	  ABX_TEST_PLATFORM=linux-arm64 ABX_TEST_LOG=$(abspath $(ARM64_B))/test/log \
	  tests/run.sh $(patsubst %,--name %,$(ARM64_TESTS)) --extra tests/arm64

# Both binaries, built from the pins, then tools/release.sh: dist/, the SBOMs
# and SHA256SUMS. The arm64 build goes to $(B)/arm64.
release:
	@tools/hostdeps.sh build-arm64
	@$(MAKE) --no-print-directory ARCH=x64 B=$(B) all
	@$(MAKE) --no-print-directory ARCH=arm64 B=$(B)/arm64 all
	@tools/release.sh $(DIST) $(VERSION) $(B)/agent-sandbox-server $(B)/arm64/agent-sandbox-server

# make release here, then again in a copy of the tracked files elsewhere, in
# another time zone (and later), and cmp of every file in dist/.
check-release: release
	@ABX_TEST_RELEASE_DIST=$(abspath $(DIST)) ABX_TEST_RELEASE_B=$(abspath $(B)) ABX_TEST_BIN=$(abspath $(B))/agent-sandbox-server \
	  ABX_TEST_LOG=$(abspath $(B))/test/release tests/run.sh --no-integration --extra tests/release

e2e:
	@tools/hostdeps.sh e2e
	@$(MAKE) --no-print-directory $(BIN)
	@tests/run.sh --e2e

# The binary plus one agent-sandbox-<applet> link per applet. The links are
# relative, so they stay right under DESTDIR staging and after relocation.
install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/agent-sandbox-server
	@for a in $$($(BIN) --list | cut -d' ' -f1); do \
		ln -sfn agent-sandbox-server $(DESTDIR)$(PREFIX)/bin/agent-sandbox-$$a || exit 1; \
	done
	@echo "installed $(DESTDIR)$(PREFIX)/bin/agent-sandbox-server and its applet links"

clean:
	rm -rf $(B)/rel $(B)/san $(B)/tsan $(B)/unit $(B)/fuzz $(B)/fuzzobj $(B)/gen $(BIN) $(BIN).debug $(BIN).debug.map $(B)/test

distclean:
	rm -rf $(B)
