/*
 * promtext.h: writing the Prometheus text exposition format 0.0.4 into a
 * caller's buffer, for the worker's and the coordinator's /metrics
 * (worker/src/metrics.c, coordinator/src/metrics.c): an output cursor
 * with snprintf semantics, HELP/TYPE lines, simple samples, label-value
 * escaping, float formatting, and cutting an oversized rendering back to
 * whole lines.
 *
 * Terms: a "rendering" is the whole exposition text; "need" is the length
 * it takes in full, whatever part of it fitted.
 *
 * Thread safety: no shared state; a cursor belongs to one thread.
 */
#ifndef ONCEQ_COMMON_PROMTEXT_H
#define ONCEQ_COMMON_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>

/* An output cursor with snprintf semantics: `need` counts every byte the
 * full text takes, `buf` holds what fits (NUL-terminated when len > 0). */
typedef struct cm_prom_out {
  char *buf;
  size_t len;
  size_t need;
} cm_prom_out;

/* Start an empty rendering into buf (len may be 0). */
void cm_prom_out_init(cm_prom_out *o, char *buf, size_t len);

void cm_prom_printf(cm_prom_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "# HELP name help" and "# TYPE name type". */
void cm_prom_help_type(cm_prom_out *o, const char *name, const char *help,
                       const char *type);

/* A whole single-sample family: HELP, TYPE and "name v". */
void cm_prom_counter(cm_prom_out *o, const char *name, const char *help,
                     uint64_t v);
void cm_prom_gauge(cm_prom_out *o, const char *name, const char *help,
                   long long v);
/* A build-info gauge: HELP, TYPE and name{version="..."} 1. */
void cm_prom_info(cm_prom_out *o, const char *name, const char *help,
                  const char *version);

/* Write a label value (without its quotes) with the escapes the text
 * format requires. */
void cm_prom_label_value(cm_prom_out *o, const char *s);

/* Format v as Prometheus reads floats: the shortest text that reads back
 * as the same double, without an exponent between 1e-4 and 1e15 ("0.005",
 * "2.5", "60", "1e-05"), or +Inf/-Inf/NaN. */
void cm_prom_fmt_float(char *dst, size_t len, double v);

/* Render into buf with render (snprintf semantics; ud NULL renders
 * nothing). When the text does not fit, it is cut after the last whole line
 * that does, so a reader never sees half a sample. Returns the bytes kept;
 * buf (if len > 0) is NUL-terminated. */
size_t cm_prom_render_lines(size_t (*render)(void *ud, char *buf, size_t len),
                            void *ud, char *buf, size_t len);

#endif
