/* The edgedp core's public API: everything an application and its port use.
 *
 *   edgedp/port.h     edp_port_t (the board's callbacks), edp_flash_t, EDP_STORE_SIZE
 *   edgedp/device.h   edp_device_t (opaque storage of EDP_DEVICE_SIZE bytes) and its calls
 *   edgedp/model.h    edp_model_t, the model data `edgedp deploy` generates
 *   edgedp/options.h  the compile-time options (-D or EDP_CONFIG)
 *   edgedp/error.h    the EDP_ERR_* codes
 *
 * The rest of the core (firmware/core/src) is internal: its headers are not
 * installed and may change in any release. docs/vendoring.md says how to build
 * the core into a firmware. */
#ifndef EDGEDP_EDGEDP_H
#define EDGEDP_EDGEDP_H

#include "edgedp/options.h"
#include "edgedp/error.h"
#include "edgedp/port.h"
#include "edgedp/model.h"
#include "edgedp/device.h"

#endif
