/* The Cortex-M4 vector table (startup.c's edp_vectors, in flash at
 * .isr_vector): the initial SP, 15 system exception vectors and the STM32F4's
 * 82 peripheral interrupts. The stm32f4 port copies it to SRAM and points VTOR
 * there (board.c). */
#ifndef EDGEDP_VECTORS_H
#define EDGEDP_VECTORS_H

#define EDP_VECTOR_COUNT (16 + 82)

extern void (*const edp_vectors[EDP_VECTOR_COUNT])(void);

/* Faults' and unexpected interrupts' handler: parks the core until the
 * watchdog (production) or the host's timeout (emulation) ends it. */
void edp_default_handler(void);

#endif
