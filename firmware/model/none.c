/* MODEL=none: an image without a model; INFER answers EDP_ERR_NO_MODEL. */
#include "edgedp/model.h"

const edp_model_t *const edp_app_model = 0;
