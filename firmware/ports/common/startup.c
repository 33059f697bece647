/* Cortex-M4 reset handler and vector table shared by the stm32f4 and qemu ports.
 *
 * The FPU is enabled (CPACR CP10/CP11 full access) in assembly before any C
 * code runs: GCC may schedule a VFP instruction ahead of a CPACR store in the
 * same function, which faults with NOCP. Then .data is copied, .bss zeroed
 * (.noinit is left alone) and main() called. Symbols come from the linker script. */
#include <stdint.h>

#include "stackwipe.h"
#include "vectors.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);

void edp_reset_handler(void);
void SysTick_Handler(void) __attribute__((weak, alias("edp_default_handler")));
/* The stm32f4 port's console interrupts (ports/stm32f4/board.c defines the one it uses). */
void USART2_IRQHandler(void) __attribute__((weak, alias("edp_default_handler")));
void USART3_IRQHandler(void) __attribute__((weak, alias("edp_default_handler")));

__attribute__((naked, noreturn)) void edp_reset_handler(void)
{
    __asm__ volatile(
        "ldr r0, =0xE000ED88\n"   /* CPACR */
        "ldr r1, [r0]\n"
        "orr r1, r1, #(0xF << 20)\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
        "b edp_c_start\n");
}

__attribute__((noreturn, used)) void edp_c_start(void)
{
    /* _sdata/_edata and _sbss/_ebss are the linker script's bounds of one section each,
     * which cppcheck sees as distinct objects (comparePointers). */
    uint32_t *src = &_sidata, *dst = &_sdata;
    while (dst < &_edata) *dst++ = *src++;  /* cppcheck-suppress comparePointers */
    for (dst = &_sbss; dst < &_ebss;) *dst++ = 0;  /* cppcheck-suppress comparePointers */
    main();
    for (;;) {
    }
}

/* Assembly: it must not push anything itself (a push would land in the range
 * it zeroes) and reads SP only once; r0-r3 and r12 only, 32 bytes a pass
 * then words, ascending from `from` rounded up to a word. */
__attribute__((naked)) void edp_cortexm_stack_wipe(void *from)
{
    (void)from;
    __asm__ volatile(
        "adds r0, r0, #3\n"
        "bic r0, r0, #3\n"
        "mov r1, sp\n"
        "movs r2, #0\n"
        "movs r3, #0\n"
        "1: add r12, r0, #32\n"
        "cmp r12, r1\n"
        "bhi 2f\n"
        "strd r2, r3, [r0], #8\n"
        "strd r2, r3, [r0], #8\n"
        "strd r2, r3, [r0], #8\n"
        "strd r2, r3, [r0], #8\n"
        "b 1b\n"
        "2: cmp r0, r1\n"
        "bhs 3f\n"
        "str r2, [r0], #4\n"
        "b 2b\n"
        "3: bx lr\n");
}

static uint8_t sent = 1;  /* something was sent since the last wipe; at boot: the RAM a warm
                           * reset (watchdog, fault) kept from the previous run goes at the first read */

void edp_cortexm_sent(void)
{
    sent = 1;
}

void edp_cortexm_wipe_if_sent(void)
{
    if (!sent) return;
    sent = 0;
    const uintptr_t low = (uintptr_t)&_estack - EDP_STACK_MAX, heap = (uintptr_t)sbrk(0);
    edp_cortexm_stack_wipe((void *)(low > heap ? low : heap));  /* never the heap (the test images' rand() state) */
}

/* Faults and unexpected interrupts park the core: the watchdog (production)
 * or the host's response timeout (emulation) reports it. */
void edp_default_handler(void)
{
    for (;;) {
    }
}

__attribute__((section(".isr_vector"), used)) void (*const edp_vectors[EDP_VECTOR_COUNT])(void) = {
    (void (*)(void))(&_estack),
    edp_reset_handler,
    edp_default_handler, /* NMI */
    edp_default_handler, /* HardFault */
    edp_default_handler, /* MemManage */
    edp_default_handler, /* BusFault */
    edp_default_handler, /* UsageFault */
    0, 0, 0, 0,
    edp_default_handler, /* SVCall */
    edp_default_handler, /* DebugMon */
    0,
    edp_default_handler, /* PendSV */
    SysTick_Handler,
    /* 82 peripheral interrupts: unused but for the stm32f4 console's USART
     * (IRQ 38, 39; the qemu port polls its USART1). */
    [16 ... 16 + 37] = edp_default_handler,
    [16 + 38] = USART2_IRQHandler,
    [16 + 39] = USART3_IRQHandler,
    [16 + 40 ... EDP_VECTOR_COUNT - 1] = edp_default_handler,
};
