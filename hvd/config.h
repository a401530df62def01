/* hvd/config.h: the bottom of hvd/'s internal headers (hvd/config.c): the
 * HVD_* settings, read once by hvd_init, the log every message of hvd/
 * goes through, the clock, and the MPI check macro. Knows nothing of
 * requests or the engine.
 *
 * hvd/'s files form a line; each includes only headers below its own
 * (test/check_layers.sh keeps it so), bottom first:
 *   config  events  index  timeline  contention  bind  topology   leaves
 *   requests      requests, the state the API and engine share, waits
 *   plan          the plan container, grouping, byte formats
 *   coordinator, execute   the slow path; running one response
 *   engine        the background thread's cycle
 *   api, optimizer         the public calls
 */
#ifndef HVD_CONFIG_H
#define HVD_CONFIG_H

#include <stddef.h>
#include "hvd/hvd.h"
#include "ring/ring.h"

typedef enum {
    HVD__LOG_ERROR,
    HVD__LOG_WARNING,
    HVD__LOG_INFO,
    HVD__LOG_DEBUG
} hvd__log_level_t;

typedef enum { HVD__BIND_CORE, HVD__BIND_NUMA, HVD__BIND_NONE } hvd__bind_t;
/* HVD_INTRANODE: how ranks of one node reduce host tensors. */
typedef enum {
    HVD__INTRANODE_AUTO,
    HVD__INTRANODE_SHM,
    HVD__INTRANODE_RING
} hvd__intranode_t;

typedef struct {
    size_t fusion_threshold;       /* bytes; 0: no fusion */
    double cycle_time_s;
    char timeline[4096];           /* path, "" when off */
    double stall_check_s;
    double stall_shutdown_s;       /* 0: off; 600 by default */
    hvd__log_level_t log_level;
    hvd__bind_t bind;
    hvd__intranode_t intranode;
    int hierarchical;              /* HVD_HIERARCHICAL_ALLREDUCE: 0 or 1 */
    double spin_s;                 /* HVD_SPIN_TIME (hvd__engine.spare_pus) */
} hvd__config_t;

/* Fills config from the environment; HVD_ERR_ARG naming the variable. */
int hvd__config_read(hvd__config_t *config);
/* The effective settings as an aligned table (rank 0, info level). */
void hvd__config_print(const hvd__config_t *config);
/* Collective over comm: whether every rank has the same value of each
 * setting that must agree (the table's agree column). HVD_OK, or
 * HVD_ERR_MISMATCH on every rank, each rank logging which setting
 * differs and the ranks' values (ring_settings_agree); HVD_ERR_NOMEM,
 * HVD_ERR_MPI. */
int hvd__config_agree(MPI_Comm comm, const hvd__config_t *config);

/* ---- the log ---- */
extern hvd__log_level_t hvd__log_level;
/* This process's rank in the log's prefix, set by hvd_init; -1 before. */
extern int hvd__log_rank;
/* One line on stderr, "hvd[RANK] LEVEL: text" ("hvd LEVEL: text" before
 * the rank is known), written at once so that ranks' lines do not
 * interleave; nothing above HVD_LOG_LEVEL. */
void hvd__log(hvd__log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text of the last error line logged on the calling thread ("" when
 * none since the last clear), and setting it (hvd_last_error's, and a
 * failed request's message carried from the engine's thread to hvd_wait's
 * caller). */
const char *hvd__thread_error(void);
void hvd__set_thread_error(const char *text);
/* An error line for an MPI call that returned rc: where, which call, and
 * MPI's own text for rc. */
void hvd__log_mpi_error(int rc, const char *call, const char *file, int line);

/* Library check (ring/ring_internal.h's RING_CHECK_MPI): log where an MPI
 * call failed and why, set `status` to HVD_ERR_MPI and jump to the
 * function's `out:` label, which releases what it holds. */
#define HVD_CHECK_MPI(call)                                                    \
    do {                                                                       \
        int hvd__rc = (call);                                                  \
        if (hvd__rc != MPI_SUCCESS) {                                          \
            hvd__log_mpi_error(hvd__rc, #call, __FILE__, __LINE__);            \
            status = HVD_ERR_MPI;                                              \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* The same for a call of ring_dev()'s table, which logs its own failure:
 * its status into `status`, and `goto out`. */
#define HVD_CHECK_DEV(call)                                                    \
    do {                                                                       \
        int hvd__rc = (call);                                                  \
        if (hvd__rc != RING_OK) {                                              \
            status = hvd__rc;                                                  \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* Seconds on a monotonic clock. */
double hvd__now(void);

#endif /* HVD_CONFIG_H */
