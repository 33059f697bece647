# Source lists and flags shared by the Makefile and PlatformIO (firmware/ports/stm32f4/pio_build.py
# reads this file): one source of truth for what each image is built from.

# The DP core. arch/<name>/<module>_<name>.c holds the architecture-specific part of <module>.c
# (every base name is unique, so the sources fit one flat object folder or archive);
# every file is listed, and only the one the compiler's target selects (core/src/arch/arch.h)
# is not empty.
EDP_CORE_SRCS := \
	firmware/core/src/answer.c \
	firmware/core/src/audit.c \
	firmware/core/src/auth.c \
	firmware/core/src/budget.c \
	firmware/core/src/cobs.c \
	firmware/core/src/crc32.c \
	firmware/core/src/deadline.c \
	firmware/core/src/device.c \
	firmware/core/src/dlap.c \
	firmware/core/src/drbg.c \
	firmware/core/src/flog.c \
	firmware/core/src/frame.c \
	firmware/core/src/mark.c \
	firmware/core/src/mech.c \
	firmware/core/src/model.c \
	firmware/core/src/model_graph.c \
	firmware/core/src/model_s8.c \
	firmware/core/src/rate.c \
	firmware/core/src/sha256.c \
	firmware/core/src/store.c \
	firmware/core/src/window.c \
	firmware/core/src/arch/armv7m/dlap_armv7m.c \
	firmware/core/src/arch/armv7m/drbg_armv7m.c \
	firmware/core/src/arch/armv7m/model_armv7m.c \
	firmware/core/src/arch/portable/dlap_portable.c \
	firmware/core/src/arch/portable/drbg_portable.c \
	firmware/core/src/arch/portable/model_portable.c

# The model compiled into every image: C data written by `edgedp deploy`
# (`make firmware MODEL=path/to/model.c`; MODEL=firmware/model/none.c builds an image without
# one). The default is the bundled digits teacher ensemble.
MODEL ?= firmware/model/digits_ensemble.c

EDP_APP_SRCS := firmware/app/main.c $(MODEL)
EDP_TEST_APP_SRCS := firmware/app/naive.c

EDP_CORTEXM_SRCS := \
	firmware/ports/common/startup.c \
	firmware/ports/common/systick.c

EDP_STM32F4_SRCS := \
	firmware/ports/stm32f4/board.c \
	firmware/ports/stm32f4/clock.c \
	firmware/ports/stm32f4/uart.c \
	firmware/ports/stm32f4/rng.c \
	firmware/ports/stm32f4/rtc.c \
	firmware/ports/stm32f4/bkpsram.c \
	firmware/ports/stm32f4/cycles.c \
	firmware/ports/stm32f4/flash.c

# Everything the production stm32f4 image is built from (PlatformIO builds this list).
EDP_STM32F4_IMAGE_SRCS = $(EDP_CORE_SRCS) $(EDP_APP_SRCS) $(EDP_CORTEXM_SRCS) $(EDP_STM32F4_SRCS)

EDP_QEMU_SRCS := firmware/ports/qemu/board.c firmware/ports/common/ramflash.c
EDP_POSIX_SRCS := firmware/ports/posix/board.c firmware/ports/common/ramflash.c

# firmware/core/include is the core's public API (edgedp/edgedp.h), all an application and a port
# need (tests/consumer builds one with it alone). firmware/core/src holds the core's internal
# headers: only this project's own ports reach into them (the stm32f4 rollback shadow reads the
# store record's sequence, the posix port the store layout, the qemu test port hashes with the
# core's SHA-256).
EDP_INCLUDES := firmware/core/include firmware/core/src firmware/ports/common firmware/app

EDP_ARM_CFLAGS := -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 \
	-std=c99 -O2 -g -ffunction-sections -fdata-sections -ffp-contract=off \
	-Wall -Wextra -Werror
EDP_ARM_LDFLAGS := -nostartfiles -Wl,--gc-sections --specs=nano.specs --specs=nosys.specs

# Production stm32f4 image: console on USART2 (PA2/PA3; Renode stm32f4_discovery usart2; on a real
# STM32F4DISCOVERY wire a USB-serial adapter, see docs/hardware.md).
EDP_STM32F4_DEFS := -DEDP_TEST_BUILD=0 -DEDP_CONSOLE_USART=2
# The stm32f4 test image (build/stm32f4-test, INFO build=test): the same port and console with the
# public test seed and key and the test commands, for the host harness on Renode. Not for PlatformIO.
EDP_STM32F4_TEST_DEFS := -DEDP_TEST_BUILD=1 -DEDP_CONSOLE_USART=2
EDP_STM32F4_LDSCRIPT := firmware/ports/stm32f4/stm32f4.ld
