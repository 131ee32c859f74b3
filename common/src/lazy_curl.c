/*
 * lazy_curl.c: the libcurl functions the programs use, forwarded to the
 * library loaded on first use (lazylib.h). A failed load makes them fail
 * the way libcurl reports failure (CURLE_FAILED_INIT, NULL, ...).
 */
/* our definitions of curl_easy_setopt/getinfo, not the type-check macros */
#define CURL_DISABLE_TYPECHECK 1
#include <stdarg.h>
#include <stddef.h>

#include <curl/curl.h>

#include "lazylib.h"

#define CURL_SONAME "libcurl.so.4"
#define CURL_PACKAGE "libcurl4"

#define LAZY(name) CM_LAZY(name, CURL_SONAME, CURL_PACKAGE)

CURLcode curl_global_init(long flags)
{
  LAZY(curl_global_init);
  return fn ? fn(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
  LAZY(curl_global_cleanup);
  if (fn)
    fn();
}

CURL *curl_easy_init(void)
{
  LAZY(curl_easy_init);
  return fn ? fn() : NULL;
}

/* The one variadic argument's type follows from the option's number range
 * (curl.h: CURLOPTTYPE_LONG, _OBJECTPOINT, _FUNCTIONPOINT, _OFF_T, _BLOB),
 * so it is read with its own type and passed on as such. */
CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...)
{
  LAZY(curl_easy_setopt);
  if (!fn)
    return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, option);
  CURLcode rc;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    long v = va_arg(ap, long);
    rc = fn(curl, option, v);
  } else if (option < CURLOPTTYPE_FUNCTIONPOINT) {
    void *v = va_arg(ap, void *);
    rc = fn(curl, option, v);
  } else if (option < CURLOPTTYPE_OFF_T) {
    void (*v)(void) = va_arg(ap, void (*)(void));
    rc = fn(curl, option, v);
  } else if (option < CURLOPTTYPE_BLOB) {
    curl_off_t v = va_arg(ap, curl_off_t);
    rc = fn(curl, option, v);
  } else {
    void *v = va_arg(ap, void *);
    rc = fn(curl, option, v);
  }
  va_end(ap);
  return rc;
}

/* every CURLINFO takes one pointer */
CURLcode curl_easy_getinfo(CURL *curl, CURLINFO info, ...)
{
  LAZY(curl_easy_getinfo);
  if (!fn)
    return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, info);
  void *p = va_arg(ap, void *);
  va_end(ap);
  return fn(curl, info, p);
}

CURLcode curl_easy_perform(CURL *curl)
{
  LAZY(curl_easy_perform);
  return fn ? fn(curl) : CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL *curl)
{
  LAZY(curl_easy_cleanup);
  if (fn)
    fn(curl);
}

void curl_easy_reset(CURL *curl)
{
  LAZY(curl_easy_reset);
  if (fn)
    fn(curl);
}

const char *curl_easy_strerror(CURLcode code)
{
  LAZY(curl_easy_strerror);
  return fn ? fn(code) : "libcurl could not be loaded";
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s)
{
  LAZY(curl_slist_append);
  return fn ? fn(list, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *list)
{
  LAZY(curl_slist_free_all);
  if (fn)
    fn(list);
}

void curl_free(void *p)
{
  LAZY(curl_free);
  if (fn)
    fn(p);
}

CURLU *curl_url(void)
{
  LAZY(curl_url);
  return fn ? fn() : NULL;
}

void curl_url_cleanup(CURLU *handle)
{
  LAZY(curl_url_cleanup);
  if (fn)
    fn(handle);
}

CURLUcode curl_url_set(CURLU *handle, CURLUPart what, const char *part,
                       unsigned int flags)
{
  LAZY(curl_url_set);
  return fn ? fn(handle, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

CURLUcode curl_url_get(CURLU *handle, CURLUPart what, char **part,
                       unsigned int flags)
{
  LAZY(curl_url_get);
  return fn ? fn(handle, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

const char *curl_url_strerror(CURLUcode code)
{
  LAZY(curl_url_strerror);
  return fn ? fn(code) : "libcurl could not be loaded";
}

CURLM *curl_multi_init(void)
{
  LAZY(curl_multi_init);
  return fn ? fn() : NULL;
}

CURLMcode curl_multi_add_handle(CURLM *multi_handle, CURL *curl_handle)
{
  LAZY(curl_multi_add_handle);
  return fn ? fn(multi_handle, curl_handle) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_remove_handle(CURLM *multi_handle, CURL *curl_handle)
{
  LAZY(curl_multi_remove_handle);
  return fn ? fn(multi_handle, curl_handle) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_perform(CURLM *multi_handle, int *running_handles)
{
  LAZY(curl_multi_perform);
  return fn ? fn(multi_handle, running_handles) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_poll(CURLM *multi_handle, struct curl_waitfd extra_fds[],
                          unsigned int extra_nfds, int timeout_ms, int *ret)
{
  LAZY(curl_multi_poll);
  return fn ? fn(multi_handle, extra_fds, extra_nfds, timeout_ms, ret)
            : CURLM_INTERNAL_ERROR;
}

CURLMsg *curl_multi_info_read(CURLM *multi_handle, int *msgs_in_queue)
{
  LAZY(curl_multi_info_read);
  return fn ? fn(multi_handle, msgs_in_queue) : NULL;
}

CURLMcode curl_multi_cleanup(CURLM *multi_handle)
{
  LAZY(curl_multi_cleanup);
  return fn ? fn(multi_handle) : CURLM_INTERNAL_ERROR;
}

const char *curl_multi_strerror(CURLMcode code)
{
  LAZY(curl_multi_strerror);
  return fn ? fn(code) : "libcurl could not be loaded";
}
