/* USART console: 8N1, no flow control; TX polled, RX by the RXNE interrupt
 * into a ring (stm32f4.h: edp_stm32_rx_t) that the frame loop drains, so bytes
 * that arrive while the device computes an answer are kept.
 * QEMU models the USART (SR.RXNE/TXE, DR, CR1.UE/TE/RE/RXNEIE and its IRQ line)
 * but not GPIO or RCC; the pin and clock set-up is harmless there. */
#include "edgedp/error.h"
#include "stm32f4.h"

void edp_stm32_gpio_af(edp_gpio_regs_t *g, uint32_t pin, uint32_t af)
{
    uint32_t two = 2u * pin, four = 4u * (pin & 7u);
    g->AFR[pin >> 3] = (g->AFR[pin >> 3] & ~(0xFu << four)) | (af << four);
    g->OTYPER &= ~(1u << pin);
    g->OSPEEDR = (g->OSPEEDR & ~(3u << two)) | (2u << two);   /* high speed */
    g->PUPDR = (g->PUPDR & ~(3u << two)) | (1u << two);       /* pull-up: idle RX reads 1 */
    g->MODER = (g->MODER & ~(3u << two)) | (2u << two);       /* alternate function */
}

void edp_stm32_uart_init(edp_usart_regs_t *u, uint32_t pclk_hz, uint32_t baud)
{
    u->CR1 = 0;
    u->CR2 = 0;                                    /* 1 stop bit */
    u->CR3 = 0;                                    /* no flow control, no DMA */
    u->BRR = (pclk_hz + baud / 2u) / baud;         /* OVER8 = 0: mantissa.fraction/16 = pclk/baud */
    u->CR1 = USART_CR1_UE | USART_CR1_TE | USART_CR1_RE | USART_CR1_RXNEIE;  /* 8 data bits, no parity */
}

void edp_stm32_uart_write(edp_usart_regs_t *u, const uint8_t *buf, size_t n, uint32_t spin)
{
    while (n--) {
        uint32_t s = spin;
        while (!(EDP_RD(u->SR) & USART_SR_TXE) && --s) {
        }
        u->DR = *buf++;
    }
}

#define RX_MASK (EDP_STM32_RX_RING - 1u)
#define LINE_ERRORS (USART_SR_FE | USART_SR_NF | USART_SR_PE)

EDP_STM32_RAMFUNC void edp_stm32_uart_irq(edp_usart_regs_t *u, edp_stm32_rx_t *r)
{
    /* SR then DR: the pair clears RXNE, ORE, NF, FE and PE. With ORE, DR holds
     * the byte before the lost one: the loss is flagged on the next slot. An
     * ORE set between the two reads is cleared unseen (stm32f4.h). */
    const uint32_t sr = EDP_RD(u->SR);
    const uint32_t b = EDP_RD(u->DR) & 0xFFu;
    const uint32_t h = r->head;
    if (!(sr & USART_SR_RXNE)) return;
    if (h - r->tail >= EDP_STM32_RX_RING) {  /* full: b is lost */
        r->mark = EDP_STM32_RX_LOST;
        r->overruns++;
        return;
    }
    r->slot[h & RX_MASK] = (uint16_t)(b | r->mark | (sr & LINE_ERRORS ? EDP_STM32_RX_BAD : 0u));
    r->head = h + 1u;
    r->mark = sr & USART_SR_ORE ? EDP_STM32_RX_LOST : 0u;
    if (sr & (USART_SR_ORE | LINE_ERRORS)) {
        if (sr & USART_SR_ORE) r->overruns++;
        if (sr & LINE_ERRORS) r->line_errors++;
    }
}

/* The invalid frame handed over in place of a damaged one: 0x01, 254 x 0xFF,
 * 0x00 (stm32f4.h, edp_stm32_rx_read: invalid COBS after any prefix). */
#define POISON_LEN 256u

size_t edp_stm32_rx_read(edp_stm32_rx_t *r, uint8_t *buf, size_t max)
{
    size_t n = 0;
    uint32_t t = r->tail;
    const uint32_t h = r->head;  /* slots below h are written (the interrupt stores a slot, then head) */
    while (n < max) {
        uint32_t e;
        if (r->poison) {
            const uint32_t p = r->poison--;
            buf[n++] = p == POISON_LEN ? 0x01u : p == 1u ? 0x00u : 0xFFu;
            continue;
        }
        if (t == h) break;
        /* Read and wipe: a later RAM read finds no request in the ring (the
         * core wipes its own copy likewise); the slot is the reader's until
         * tail moves past it. */
        e = r->slot[t & RX_MASK];
        r->slot[t++ & RX_MASK] = 0;
        if ((e & (EDP_STM32_RX_LOST | EDP_STM32_RX_BAD)) && !r->skip) {
            r->poison = POISON_LEN;
            r->skip = 1;
        }
        if (r->skip) {
            /* The damaged frame ends at a 0x00 that is itself good (it may
             * follow the loss); the poison's 0x00 stands in for it. A 0x00
             * that came with a line error is BAD and ends nothing: the skip
             * runs on through the next frame to its 0x00, so two requests
             * get one answer (stm32f4.h, edp_stm32_rx_read). */
            if ((e & ~EDP_STM32_RX_LOST) == 0) r->skip = 0;
            continue;
        }
        buf[n++] = (uint8_t)e;
    }
    r->tail = t;  /* after the slots were read: the interrupt may reuse them now */
    return n;
}

int edp_stm32_rx_isr_share(uint32_t sysclk_hz, uint32_t baud, uint32_t *share)
{
    const uint64_t c = EDP_STM32_RX_ISR_CYCLES;
    const uint64_t t = baud ? (uint64_t)sysclk_hz * 9u / baud : 0u;
    *share = 0;
    if (t <= c) return EDP_ERR_TIMING;   /* the interrupt alone can fill the time between bytes */
    *share = (uint32_t)(((c << 16) + (t - c) - 1u) / (t - c));   /* <= c << 16 = 2^24 */
    return EDP_OK;
}

uint64_t edp_stm32_window_cycles(uint64_t work, uint32_t share)
{
    const uint64_t w = work + EDP_STM32_RX_ISR_CYCLES;
    if (work >= EDP_STM32_WINDOW_WORK_MAX || share > EDP_STM32_RX_SHARE_MAX) return UINT64_MAX;
    return w + ((w * share) >> 16) + 1u;   /* w < 2^40, share <= 2^24: w * share < 2^64 */
}
