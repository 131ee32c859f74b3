/*
 * curlpost.c: libcurl set-up shared by the daemons' POSTs (curlpost.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curlpost.h"

int cm_curl_global_init(char *err, size_t errlen)
{
  if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK)
    return 0;
  snprintf(err, errlen, "libcurl failed to initialise");
  return -1;
}

void cm_curl_global_cleanup(void)
{
  curl_global_cleanup();
}

int cm_curl_check_url(const char *flag, const char *url, char *err,
                      size_t errlen)
{
  CURLU *u = curl_url();
  if (!u) {
    snprintf(err, errlen, "out of memory checking %s", flag);
    return 1;
  }
  int rc = 0;
  char *scheme = NULL, *host = NULL, *port = NULL;
  /* the URL itself is never printed: it may hold credentials */
  CURLUcode c = curl_url_set(u, CURLUPART_URL, url ? url : "", 0);
  if (c != CURLUE_OK) {
    snprintf(err, errlen,
             "%s URL is not usable: %s; fix it (e.g. "
             "https://host:8443/path, port 1-65535)",
             flag, curl_url_strerror(c));
    rc = 2;
    goto out;
  }
  if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
    snprintf(err, errlen, "%s URL must start with http:// or https://", flag);
    rc = 2;
    goto out;
  }
  if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
    snprintf(err, errlen, "%s URL has no host; e.g. https://host/path", flag);
    rc = 2;
    goto out;
  }
  if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK &&
      strtol(port, NULL, 10) == 0) {
    snprintf(err, errlen, "%s URL has port 0; give a port from 1 to 65535",
             flag);
    rc = 2;
    goto out;
  }
out:
  curl_free(port);
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return rc;
}

CURLcode cm_curl_post_setup(CURL *e, const cm_curl_post *p)
{
  CURLcode rc;
#define SET(opt, val)                                                          \
  do {                                                                         \
    rc = curl_easy_setopt(e, opt, val);                                        \
    if (rc != CURLE_OK)                                                        \
      return rc;                                                               \
  } while (0)
  SET(CURLOPT_URL, p->url);
  /* the daemons handle their own signals; libcurl must not (threads) */
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_POST, 1L);
  /* a redirect is an answer (its Location is reported), not followed */
  SET(CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
  SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  SET(CURLOPT_CONNECTTIMEOUT_MS, p->connect_timeout_ms);
  SET(CURLOPT_TIMEOUT_MS, p->timeout_ms);
  SET(CURLOPT_SSL_VERIFYPEER, p->insecure ? 0L : 1L);
  SET(CURLOPT_SSL_VERIFYHOST, p->insecure ? 0L : 2L);
  SET(CURLOPT_USERAGENT, p->user_agent);
  if (p->progress) {
    SET(CURLOPT_NOPROGRESS, 0L);
    SET(CURLOPT_XFERINFOFUNCTION, p->progress);
    SET(CURLOPT_XFERINFODATA, p->progress_ud);
  }
#undef SET
  return CURLE_OK;
}
