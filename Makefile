# edgedp: the two README commands are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
include firmware/sources.mk

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.edgedp-installed
APT_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm cmake python3-venv python3-pip postgresql
APT_PACKAGES += chromium chromium-driver  # the dashboard's browser test (tests/python/test_dashboard.py)
ARM_CC := arm-none-eabi-gcc
HOST_CC ?= gcc
KEY := tests/keys/test-device.key
INC := $(addprefix -I,$(EDP_INCLUDES)) -Ibuild/gen

.PHONY: help setup firmware posix demo test test-fast test-renode provision provisioned-qemu clean FORCE

help:
	@echo "make demo   - set up, build, run the firmware in QEMU and stream sample logits"
	@echo "make test   - set up, build, run the whole test suite (pytest + Robot Framework)"
	@echo "make test-fast - the tests that need no emulator and no training (about a minute)"
	@echo "make setup | firmware | posix | clean"
	@echo "make test-renode - only the Renode suite (renode/edgedp.robot; needs renode-test on PATH)"
	@echo "make provision KEY=path/to/device.key [MODEL=...] - production image with its HMAC key, of the model it was built with (docs/hardware.md)"

# ---- setup: Debian packages and the Python environment -----------------------
# `make setup` (and `make test`) install the package with every extra ([test]); `make demo` only
# what the demo needs ([demo]: scikit-learn for the on-device digits model), unless the full
# install is already there.
DEMO_STAMP := $(VENV)/.edgedp-demo-installed
DEMO_APT_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm python3-venv python3-pip
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	test -x $(PY) || python3 -m venv $(VENV)
endef

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(call apt_install,$(APT_PACKAGES))
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	# bytecode for the editable package: under PYTHONDONTWRITEBYTECODE every command compiled it again (~90 ms a start)
	$(PY) -m compileall -q host/edgedp
	touch $@

$(DEMO_STAMP): pyproject.toml
	$(call apt_install,$(DEMO_APT_PACKAGES))
	if [ ! $(STAMP) -nt pyproject.toml ]; then \
	  $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[demo]'; fi
	touch $@

# ---- firmware -----------------------------------------------------------------
build/gen/test_keys.c: $(KEY)
	@mkdir -p $(@D)
	python3 -c 'import sys; k=bytes.fromhex(open("$(KEY)").read().strip()); assert len(k)==32, "key must be 64 hex digits"; \
	f=lambda n,b: "const uint8_t %s[32] = {%s};\n" % (n, ",".join(str(x) for x in b)); \
	sys.stdout.write("#include \"test_keys.h\"\n" + f("edp_test_device_key", k) + f("edp_test_seed", range(32)))' > $@

# Each image depends on which MODEL it was built with (firmware/sources.mk), not only on its file:
# build/<image>/model.txt records it (the host tool rebuilds a stale image with that MODEL, never
# with the default behind the user's back), and build/<image>/model.c is a copy of the model data
# the image holds (`edgedp info` and the host reference read it).
build/%/model.txt: FORCE
	@mkdir -p $(@D)
	@echo '$(MODEL)' | cmp -s - $@ || echo '$(MODEL)' > $@
KEEP_MODEL = cp $(MODEL) $(@D)/model.c

QEMU_SRCS := $(EDP_CORE_SRCS) $(EDP_APP_SRCS) $(EDP_TEST_APP_SRCS) $(EDP_CORTEXM_SRCS) $(EDP_QEMU_SRCS) build/gen/test_keys.c
STM32F4_SRCS := $(EDP_STM32F4_IMAGE_SRCS)
FW_HEADERS := $(wildcard firmware/core/include/edgedp/*.h firmware/core/src/*.h firmware/core/src/arch/*.h firmware/ports/*/*.h firmware/app/*.h)

firmware: build/qemu/edgedp.elf build/qemu-timing/edgedp.elf build/stm32f4/edgedp.elf build/stm32f4-test/edgedp.elf

# The test image, and build/qemu-cloop the same with the sampling loop in portable C
# (-DEDP_DLAP_LOOP_C=1, arch/arch.h) instead of the Thumb-2 one, the same bits: `edgedp bench
# --c-loop` traces it beside build/qemu/edgedp.elf (the loop rule in docs/benchmarks.md).
build/qemu-cloop/edgedp.elf: LOOP_FLAGS := -DEDP_DLAP_LOOP_C=1
build/qemu/edgedp.elf build/qemu-cloop/edgedp.elf: build/%/edgedp.elf: $(QEMU_SRCS) $(FW_HEADERS) build/%/model.txt firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=1 $(LOOP_FLAGS) $(INC) $(QEMU_SRCS) $(EDP_ARM_LDFLAGS) \
	  -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	$(KEEP_MODEL)
	arm-none-eabi-size $@

# The production configuration on the QEMU port (no test commands, ticks hidden, answers released at
# their deadline), with the public test seed: only for measuring the release timing under -icount.
TIMING_SRCS := $(EDP_CORE_SRCS) $(EDP_APP_SRCS) $(EDP_CORTEXM_SRCS) $(EDP_QEMU_SRCS) build/gen/test_keys.c
build/qemu-timing/edgedp.elf: $(TIMING_SRCS) $(FW_HEADERS) build/qemu-timing/model.txt firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=0 -DEDP_QEMU_TIMING_IMAGE=1 $(INC) $(TIMING_SRCS) $(EDP_ARM_LDFLAGS) \
	  -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	$(KEEP_MODEL)
	arm-none-eabi-size $@

# The test image with another bundled model: build/qemu-model-NAME/edgedp.elf runs firmware/model/NAME.c,
# or build/gen/models/NAME.c (models the tests generate with `edgedp deploy`)
# (tests and `edgedp bench` compare models this way).
QEMU_NOMODEL_SRCS := $(filter-out $(MODEL),$(QEMU_SRCS))
build/qemu-model-%/edgedp.elf: $(QEMU_NOMODEL_SRCS) firmware/model/%.c $(FW_HEADERS) firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=1 $(INC) $(QEMU_NOMODEL_SRCS) firmware/model/$*.c \
	  $(EDP_ARM_LDFLAGS) -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	cp firmware/model/$*.c $(@D)/model.c
	arm-none-eabi-size $@

build/qemu-model-%/edgedp.elf: $(QEMU_NOMODEL_SRCS) build/gen/models/%.c $(FW_HEADERS) firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=1 $(INC) $(QEMU_NOMODEL_SRCS) build/gen/models/$*.c \
	  $(EDP_ARM_LDFLAGS) -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	cp build/gen/models/$*.c $(@D)/model.c
	arm-none-eabi-size $@

# The production timing image with another bundled model (the release deadline of its INFER,
# tests/firmware/test_deadline.py and docs/benchmarks.md §5), or with one of
# build/gen/models/NAME.c (the non-finite model of the deadline test).
build/qemu-timing-model-%/edgedp.elf: $(filter-out $(MODEL),$(TIMING_SRCS)) firmware/model/%.c $(FW_HEADERS) firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=0 -DEDP_QEMU_TIMING_IMAGE=1 $(INC) $(filter-out $(MODEL),$(TIMING_SRCS)) \
	  firmware/model/$*.c $(EDP_ARM_LDFLAGS) -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	cp firmware/model/$*.c $(@D)/model.c
	arm-none-eabi-size $@

build/qemu-timing-model-%/edgedp.elf: $(filter-out $(MODEL),$(TIMING_SRCS)) build/gen/models/%.c $(FW_HEADERS) firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=0 -DEDP_QEMU_TIMING_IMAGE=1 $(INC) $(filter-out $(MODEL),$(TIMING_SRCS)) \
	  build/gen/models/$*.c $(EDP_ARM_LDFLAGS) -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	cp build/gen/models/$*.c $(@D)/model.c
	arm-none-eabi-size $@

# The test image with a bundled model built without the DSP extension (-U__ARM_FEATURE_DSP): the
# int8 kernels' portable C on the same core, whose deadline constants (EDP_DL_S8_*_C)
# tests/firmware/test_deadline.py checks.
build/qemu-nodsp-model-%/edgedp.elf: $(QEMU_NOMODEL_SRCS) firmware/model/%.c $(FW_HEADERS) firmware/ports/qemu/qemu.ld firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) -U__ARM_FEATURE_DSP -DEDP_TEST_BUILD=1 $(INC) $(QEMU_NOMODEL_SRCS) firmware/model/$*.c \
	  $(EDP_ARM_LDFLAGS) -T firmware/ports/qemu/qemu.ld -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	arm-none-eabi-size $@

build/stm32f4/edgedp.elf: $(STM32F4_SRCS) $(FW_HEADERS) build/stm32f4/model.txt $(EDP_STM32F4_LDSCRIPT) firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) $(EDP_STM32F4_DEFS) $(addprefix -I,$(EDP_INCLUDES)) $(STM32F4_SRCS) $(EDP_ARM_LDFLAGS) \
	  -T $(EDP_STM32F4_LDSCRIPT) -Wl,-Map=$(@D)/edgedp.map -o $@
	$(KEEP_MODEL)
	arm-none-eabi-size $@

# The stm32f4 test image (public test seed and key, test commands; INFO says build=test): what
# `--target renode` runs by default. The production image above stays the one to flash.
STM32F4_TEST_SRCS := $(EDP_STM32F4_IMAGE_SRCS) $(EDP_TEST_APP_SRCS) build/gen/test_keys.c
build/stm32f4-test/edgedp.elf: $(STM32F4_TEST_SRCS) $(FW_HEADERS) build/stm32f4-test/model.txt $(EDP_STM32F4_LDSCRIPT) firmware/sources.mk
	@mkdir -p $(@D)
	$(ARM_CC) $(EDP_ARM_CFLAGS) $(EDP_STM32F4_TEST_DEFS) $(INC) $(STM32F4_TEST_SRCS) $(EDP_ARM_LDFLAGS) \
	  -T $(EDP_STM32F4_LDSCRIPT) -Wl,-Map=$(@D)/edgedp.map -o $@ -lm
	$(KEEP_MODEL)
	arm-none-eabi-size $@

# make provision KEY=path/to/device.key [MODEL=path/to/model.c]  (64 hex digits: the key file the host tool reads)
#   build/stm32f4/edgedp-provisioned.elf  image with the key in .edp_key (flash it whole)
#   build/stm32f4/edp_key.bin             the 32 bytes alone, for sector 11 at 0x080E0000:
#     openocd -f board/stm32f4discovery.cfg -c "program build/stm32f4/edp_key.bin 0x080E0000 verify reset exit"
# Both hold the secret key. KEY must be given explicitly, and a key equal to the public test key
# (tests/keys/test-device.key, whatever file holds it) is refused, as is a key file group or others
# can read or write (the host tool's rule, edgedp/trust.py). The model is the one MODEL names,
# else the one the image was built with (build/stm32f4/model.txt, as `edgedp build --model` or
# `make firmware MODEL=...` recorded it), never the default behind the user's back: with neither
# (no image yet) provision refuses. It prints the model and the sha256 of the image it provisions.
PROVISION_MODEL = $(if $(filter command line environment,$(origin MODEL)),$(MODEL),$(shell cat build/stm32f4/model.txt 2>/dev/null))
provision:
	@if [ "$(origin KEY)" = file ]; then echo "usage: make provision KEY=path/to/device.key (64 hex digits)" >&2; exit 2; fi
	@mkdir -p build/stm32f4 && umask 077 && python3 -c 'import os, sys; k = bytes.fromhex(open(sys.argv[1]).read().strip()); \
	assert len(k) == 32, "the key file must hold 64 hex digits"; \
	assert k not in (bytes(32), bytes([255]) * 32), "an all-0x00 or all-0xFF key reads as unprovisioned"; \
	t = bytes.fromhex(open(sys.argv[3]).read().strip()); \
	k != t or sys.exit("refusing the public test key (" + sys.argv[3] + "): anyone can sign admin frames with it; generate a device key: (umask 077; python3 -c \"import secrets; print(secrets.token_hex(32))\" > device.key)"); \
	m = os.stat(sys.argv[1]).st_mode & 0o777; \
	m & 0o066 == 0 or sys.exit("make provision: key file %s is readable or writable by group or others (mode %03o); run: chmod 600 %s" % (sys.argv[1], m, sys.argv[1])); \
	open(sys.argv[2], "wb").write(k)' "$(KEY)" build/stm32f4/edp_key.bin tests/keys/test-device.key
	@if [ -z '$(PROVISION_MODEL)' ]; then rm -f build/stm32f4/edp_key.bin; echo "make provision: build/stm32f4/edgedp.elf records no model (it was not built yet): name the model, e.g. make provision KEY=$(KEY) MODEL=firmware/model/digits_ensemble.c" >&2; exit 2; fi
	@$(MAKE) --no-print-directory build/stm32f4/edgedp.elf MODEL='$(PROVISION_MODEL)'
	umask 077 && arm-none-eabi-objcopy --update-section .edp_key=build/stm32f4/edp_key.bin \
	  build/stm32f4/edgedp.elf build/stm32f4/edgedp-provisioned.elf
	@echo "provisioned build/stm32f4/edgedp-provisioned.elf: model $$(cat build/stm32f4/model.txt) (sha256 $$(sha256sum < build/stm32f4/model.c | cut -c1-64)), image build/stm32f4/edgedp.elf sha256 $$(sha256sum < build/stm32f4/edgedp.elf | cut -c1-64)"

# make provisioned-qemu KEY=path/to/device.key OUT=folder [MODEL=...]: the qemu port's test image
# with KEY in place of the public test key (its noise seed stays the public one: emulated, not
# private), for `edgedp provision --board qemu` (docs/fleet.md). Writes the image edgedp.elf and
# its model.c into the folder OUT (0600 in 0700: the image holds the key).
PROV_QEMU_SRCS := $(filter-out build/gen/test_keys.c,$(QEMU_SRCS))
provisioned-qemu: $(PROV_QEMU_SRCS) $(FW_HEADERS) firmware/ports/qemu/qemu.ld
	@if [ "$(origin KEY)" = file ] || [ -z "$(OUT)" ]; then echo "usage: make provisioned-qemu KEY=device.key OUT=folder" >&2; exit 2; fi
	@umask 077 && mkdir -p $(OUT) && python3 -c 'import sys; k = bytes.fromhex(open(sys.argv[1]).read().strip()); \
	assert len(k) == 32, "the key file must hold 64 hex digits"; \
	f = lambda n, b: "const uint8_t %s[32] = {%s};\n" % (n, ",".join(str(x) for x in b)); \
	sys.stdout.write("#include \"test_keys.h\"\n" + f("edp_test_device_key", k) + f("edp_test_seed", range(32)))' "$(KEY)" > $(OUT)/keys.c
	umask 077 && $(ARM_CC) $(EDP_ARM_CFLAGS) -DEDP_TEST_BUILD=1 $(INC) $(PROV_QEMU_SRCS) $(OUT)/keys.c $(EDP_ARM_LDFLAGS) \
	  -T firmware/ports/qemu/qemu.ld -o $(OUT)/edgedp.elf -lm; rc=$$?; rm -f $(OUT)/keys.c; exit $$rc
	umask 077 && cp $(MODEL) $(OUT)/model.c

# ---- native builds: the posix port (tests) and the sanitized variant -----------
POSIX_SRCS := $(EDP_CORE_SRCS) $(EDP_APP_SRCS) $(EDP_TEST_APP_SRCS) $(EDP_POSIX_SRCS) build/gen/test_keys.c
POSIX_CFLAGS := -std=c99 -O2 -g -ffp-contract=off -Wall -Wextra -Werror -DEDP_TEST_BUILD=1
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

posix: build/posix/edgedp build/posix-san/edgedp build/native/test_core build/native/fuzz_frames

build/native/fuzz_frames: tests/native/fuzz_frames.c firmware/ports/common/ramflash.c $(EDP_CORE_SRCS) $(FW_HEADERS)
	@mkdir -p $(@D)
	$(HOST_CC) $(POSIX_CFLAGS) $(SAN_FLAGS) -Ifirmware/core/include -Ifirmware/core/src -Ifirmware/ports/common tests/native/fuzz_frames.c \
	  firmware/ports/common/ramflash.c $(EDP_CORE_SRCS) -o $@ -lm

build/native/test_core: tests/native/test_core.c $(EDP_CORE_SRCS) $(FW_HEADERS)
	@mkdir -p $(@D)
	$(HOST_CC) $(POSIX_CFLAGS) $(SAN_FLAGS) -Ifirmware/core/include -Ifirmware/core/src tests/native/test_core.c $(EDP_CORE_SRCS) -o $@ -lm

build/posix/edgedp: $(POSIX_SRCS) $(FW_HEADERS) build/posix/model.txt firmware/sources.mk
	@mkdir -p $(@D)
	$(HOST_CC) $(POSIX_CFLAGS) $(INC) $(POSIX_SRCS) -o $@ -lm
	$(KEEP_MODEL)

# The posix port with another model: build/posix-model-NAME/edgedp runs firmware/model/NAME.c, or
# build/gen/models/NAME.c (models the tests generate with `edgedp deploy`).
POSIX_NOMODEL_SRCS := $(filter-out $(MODEL),$(POSIX_SRCS))
build/posix-model-%/edgedp: $(POSIX_NOMODEL_SRCS) firmware/model/%.c $(FW_HEADERS) firmware/sources.mk
	@mkdir -p $(@D)
	$(HOST_CC) $(POSIX_CFLAGS) $(INC) $(filter %.c,$^) -o $@ -lm

build/posix-model-%/edgedp: $(POSIX_NOMODEL_SRCS) build/gen/models/%.c $(FW_HEADERS) firmware/sources.mk
	@mkdir -p $(@D)
	$(HOST_CC) $(POSIX_CFLAGS) $(INC) $(filter %.c,$^) -o $@ -lm

build/posix-san/edgedp: $(POSIX_SRCS) $(FW_HEADERS) build/posix-san/model.txt firmware/sources.mk
	@mkdir -p $(@D)
	$(HOST_CC) $(POSIX_CFLAGS) $(SAN_FLAGS) $(INC) $(POSIX_SRCS) -o $@ -lm
	$(KEEP_MODEL)

# ---- the two README commands ----------------------------------------------------
demo: $(DEMO_STAMP) firmware
	$(VENV)/bin/edgedp demo

# pytest runs on every core (pytest-xdist, whole files per worker: the QEMU and native
# fixtures are per file or per worker); the Robot suite follows on QEMU.
PYTEST_WORKERS ?= $(shell nproc)
# -rs lists every skipped test with its reason.
test: setup firmware posix
	$(VENV)/bin/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile
	$(VENV)/bin/robot --pythonpath tests/robot --outputdir build/robot --consolewidth 100 tests/robot
	@if command -v $(RENODE_TEST) >/dev/null; then $(MAKE) --no-print-directory test-renode; \
	else echo "SKIPPED: the Renode suite (renode/edgedp.robot): no $(RENODE_TEST) on PATH (renode/README.md)"; fi

# ---- the Renode suite: renode/edgedp.robot under Renode's renode-test ------------------
# renode-test runs the python3 on PATH and wants its own Robot Framework version (its
# tests/requirements.txt): a separate venv holds that and this package's dependencies.
RENODE_TEST ?= renode-test
RENODE_VENV := build/venv-renode
$(RENODE_VENV)/.installed: pyproject.toml
	@command -v $(RENODE_TEST) >/dev/null || { echo "no $(RENODE_TEST) on PATH: install Renode (renode/README.md)" >&2; exit 2; }
	test -x $(RENODE_VENV)/bin/python || python3 -m venv $(RENODE_VENV)
	$(RENODE_VENV)/bin/pip install -q -r "$$(dirname "$$(readlink -f "$$(command -v $(RENODE_TEST))")")/tests/requirements.txt"
	$(RENODE_VENV)/bin/pip install -q -e .
	touch $@

test-renode: firmware $(RENODE_VENV)/.installed
	PATH="$(CURDIR)/$(RENODE_VENV)/bin:$$PATH" PYTHONPATH="$(CURDIR)/host:$(CURDIR)/tests/robot" \
	  $(RENODE_TEST) renode/edgedp.robot

# Folders python, docs, native and firmware (CONTRIBUTING.md), without the slow marker.
test-fast: setup firmware posix
	$(VENV)/bin/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile -m "not hil and not analysis and not slow"

clean:
	rm -rf build
