/*
 * lazy_mhd.c: the libmicrohttpd functions the programs use, forwarded to
 * the library loaded on first use (lazylib.h). A failed load makes them
 * fail the way the library reports failure (NULL, MHD_NO).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "lazylib.h"

#define MHD_SONAME "libmicrohttpd.so.12"
#define MHD_PACKAGE "libmicrohttpd12"

#define LAZY(name) CM_LAZY(name, MHD_SONAME, MHD_PACKAGE)

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port,
                                    MHD_AcceptPolicyCallback apc, void *apc_cls,
                                    MHD_AccessHandlerCallback dh, void *dh_cls,
                                    ...)
{
  LAZY(MHD_start_daemon_va);
  if (!fn)
    return NULL;
  va_list ap;
  va_start(ap, dh_cls);
  struct MHD_Daemon *d = fn(flags, port, apc, apc_cls, dh, dh_cls, ap);
  va_end(ap);
  return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
  LAZY(MHD_stop_daemon);
  if (fn)
    fn(daemon);
}

const char *MHD_lookup_connection_value(struct MHD_Connection *connection,
                                        enum MHD_ValueKind kind,
                                        const char *key)
{
  LAZY(MHD_lookup_connection_value);
  return fn ? fn(connection, kind, key) : NULL;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection,
                                   unsigned int status_code,
                                   struct MHD_Response *response)
{
  LAZY(MHD_queue_response);
  return fn ? fn(connection, status_code, response) : MHD_NO;
}

struct MHD_Response *
MHD_create_response_from_buffer(size_t size, void *buffer,
                                enum MHD_ResponseMemoryMode mode)
{
  LAZY(MHD_create_response_from_buffer);
  return fn ? fn(size, buffer, mode) : NULL;
}

void MHD_destroy_response(struct MHD_Response *response)
{
  LAZY(MHD_destroy_response);
  if (fn)
    fn(response);
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response,
                                        const char *header, const char *content)
{
  LAZY(MHD_add_response_header);
  return fn ? fn(response, header, content) : MHD_NO;
}

/* Only ever called on a daemon that started, so the library is loaded. */
void MHD_suspend_connection(struct MHD_Connection *connection)
{
  LAZY(MHD_suspend_connection);
  if (fn)
    fn(connection);
}

void MHD_resume_connection(struct MHD_Connection *connection)
{
  LAZY(MHD_resume_connection);
  if (fn)
    fn(connection);
}
