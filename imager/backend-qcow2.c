/* PLACEHOLDER until the qcow2 driver lands: refuses everything. */
#include <errno.h>
#include "imager/backend.h"
static int o(struct bk *bk, const char *p, unsigned f, struct im_err *err)
{ (void)bk; (void)f; return im_errf(err, IM_EXIT_UNSUPP, -ENOTSUP, "%s: qcow2 is not supported yet", p); }
const struct bk_driver bk_qcow2 = { .name = "qcow2", .open = o };
