/* Dead-stack wipe for the Cortex-M ports (stm32f4, qemu). */
#ifndef EDGEDP_CORTEXM_STACKWIPE_H
#define EDGEDP_CORTEXM_STACKWIPE_H
#include <stddef.h>

/* Zero the RAM from `from` (edp_cortexm_wipe_if_sent: _estack - EDP_STACK_MAX,
 * or the heap's current end, sbrk(0), if that is higher: the test images'
 * newlib keeps rand()'s state on the heap, which starts at the linker's _end;
 * rounded up to a word) up to the stack pointer: all of the stack below the caller's frame, where
 * the core's functions left their locals and spills and where every exception
 * entry pushed r0-r3, r12, lr, pc and xPSR (plus the handler's own saves) of
 * the code it interrupted, e.g. the sampler's registers during a QUERY. The
 * ports call it from edp_board_uart_read once an answer has been sent: a
 * later RAM read finds none of it. Time: a function of SP and `from` only. An
 * interrupt during the wipe pushes its frame below SP, where the wipe's
 * ascending pointer still zeroes it unless it has passed there already (then
 * the frame holds the wipe's own registers). */
void edp_cortexm_stack_wipe(void *from);

/* The deepest the stack goes below _estack, in bytes, over every command and
 * bundled model, with the exception frames that may be pushed below it: the
 * measured worst case (tests/firmware/test_stack_depth.py, which fails if a
 * command goes deeper than EDP_STACK_MAX less EDP_STACK_IRQ_MARGIN) plus that
 * margin for the RX interrupt's or SysTick's frame (an extended frame is 104
 * bytes, 8-byte aligned, plus the handler's pushes) and headroom. */
#define EDP_STACK_MAX 2048u
#define EDP_STACK_IRQ_MARGIN 256u

/* What the ports' uart_write and edp_board_uart_read call: note that something
 * was sent, and wipe the dead stack at the first read after it, once the
 * answer has left: [max(_estack - EDP_STACK_MAX, sbrk(0)), SP), all the RAM
 * the stack can have reached. */
void edp_cortexm_sent(void);
void edp_cortexm_wipe_if_sent(void);

/* newlib's (nosys) program break; -std=c99 hides unistd.h's declaration. */
void *sbrk(ptrdiff_t incr);

#endif
