/* Test-build secrets, generated at build time from tests/keys/ (never in source).
 * edp_test_device_key: the HMAC key of tests/keys/test-device.key.
 * edp_test_seed: the documented boot seed of test images, bytes 0x00..0x1f. */
#ifndef EDGEDP_TEST_KEYS_H
#define EDGEDP_TEST_KEYS_H
#include <stdint.h>

extern const uint8_t edp_test_device_key[32];
extern const uint8_t edp_test_seed[32];

#endif
