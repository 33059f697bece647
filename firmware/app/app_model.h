/* The model linked into this application's image (the application's, not the
 * core's: main.c hands it over with edp_device_set_model).
 *
 * Defined by the generated model source (`edgedp deploy`, firmware/model/NAME.c)
 * as `const edp_model_t *const edp_app_model = &model;`, or NULL when the image
 * is built with MODEL=firmware/model/none.c. */
#ifndef EDGEDP_APP_MODEL_H
#define EDGEDP_APP_MODEL_H
#include "edgedp/model.h"

extern const edp_model_t *const edp_app_model;

#endif
