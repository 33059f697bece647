/* Polled USART console: 8N1, no flow control, no interrupts.
 * QEMU models the USART (SR.RXNE/TXE, DR, CR1.UE/TE/RE) but not GPIO or RCC;
 * the pin and clock set-up is harmless there. */
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
    u->CR1 = USART_CR1_UE | USART_CR1_TE | USART_CR1_RE;  /* 8 data bits, no parity */
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

size_t edp_stm32_uart_read(edp_usart_regs_t *u, uint8_t *buf, size_t max)
{
    size_t n = 0;
    /* An SR read followed by a DR read also clears ORE/NF/FE/PE; a byte lost to
     * an overrun or a line error shows up as a frame CRC error upstream. */
    while (n < max && (EDP_RD(u->SR) & USART_SR_RXNE)) buf[n++] = (uint8_t)EDP_RD(u->DR);
    return n;
}
