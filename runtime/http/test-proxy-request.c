/* SPDX-License-Identifier: MIT */
/* The port proxy's reading of requests: each way a token may come, the answers of the proxy's
 * own, and exactly what the upstream gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "macro.h"
#include "proxy-request.h"
#include "proxy-token.h"

#define RT "runtime-token-for-the-test"

static char tok[PROXY_TOKEN_LEN + 1];

static void read_request(const char *head, const char *runtime_token, ProxyRequest *r) {
        assert_int_equal(proxy_request_read((const uint8_t *) head, strlen(head), runtime_token, r), 0);
}

/* The upstream head as a C string. */
static const char *upstream(ProxyRequest *r) {
        assert_true(r->forward);
        assert_int_equal(buffer_append(&r->upstream, "", 1), 0);
        return (const char *) buffer_data(&r->upstream);
}

static void test_bearer_forwards_the_path_below_the_port(void **state) {
        _cleanup_(proxy_request_done) ProxyRequest r = {};
        char head[512];

        snprintf(head, sizeof(head),
                 "GET /proxy/8080/a/b?x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer %s\r\nConnection: keep-alive\r\n"
                 "Keep-Alive: 5\r\nX-Forwarded-Prefix: /evil\r\n\r\nBODY",
                 tok);
        read_request(head, RT, &r);
        assert_int_equal(r.port, 8080);
        assert_string_equal(upstream(&r), "GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                                          "X-Forwarded-Prefix: /proxy/8080\r\n\r\nBODY");
}

static void test_the_proxys_cookie_is_dropped_and_the_others_kept(void **state) {
        _cleanup_(proxy_request_done) ProxyRequest r = {}, only = {};
        char head[512];

        snprintf(head, sizeof(head), "GET /proxy/8080 HTTP/1.1\r\nCookie: a=1; agentix_proxy_8080=%s; b=2\r\n\r\n", tok);
        read_request(head, RT, &r);
        assert_string_equal(upstream(&r), "GET / HTTP/1.1\r\nCookie: a=1; b=2\r\nConnection: close\r\n"
                                          "X-Forwarded-Prefix: /proxy/8080\r\n\r\n");
        snprintf(head, sizeof(head), "GET /proxy/8080/ HTTP/1.1\r\nCookie: agentix_proxy_8080=%s\r\n\r\n", tok);
        read_request(head, RT, &only);
        assert_null(strstr(upstream(&only), "Cookie"));
}

static void test_a_query_token_is_traded_for_a_cookie(void **state) {
        _cleanup_(proxy_request_done) ProxyRequest get = {}, post = {};
        char head[512], want[512];

        snprintf(head, sizeof(head), "GET /proxy/8080/p?agentix_token=%s&q=7 HTTP/1.1\r\n\r\n", tok);
        read_request(head, RT, &get);
        assert_false(get.forward);
        assert_int_equal(get.status, 302);
        snprintf(want, sizeof(want), "Location: /proxy/8080/p?q=7\r\nSet-Cookie: agentix_proxy_8080=%s; "
                                     "Path=/proxy/8080/; HttpOnly; SameSite=Lax\r\n", tok);
        assert_string_equal(get.headers, want);
        /* Not a GET: forwarded, the token out of the query. */
        snprintf(head, sizeof(head), "POST /proxy/8080/p?q=1&agentix_token=%s HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", tok);
        read_request(head, RT, &post);
        assert_string_equal(upstream(&post), "POST /p?q=1 HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n"
                                             "X-Forwarded-Prefix: /proxy/8080\r\n\r\nabc");
}

static void test_an_upgrade_keeps_its_connection_headers(void **state) {
        _cleanup_(proxy_request_done) ProxyRequest r = {};
        char head[512];

        snprintf(head, sizeof(head), "GET /proxy/9/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                     "Authorization: Bearer %s\r\n\r\n", tok);
        /* Port 9's token is another: 401 with port 8080's. */
        read_request(head, RT, &r);
        assert_false(r.forward);
        assert_int_equal(r.status, 401);
        proxy_request_done(&r);

        char tok9[PROXY_TOKEN_LEN + 1];
        assert_int_equal(proxy_token(RT, 9, tok9), 0);
        snprintf(head, sizeof(head), "GET /proxy/9/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                     "Authorization: Bearer %s\r\n\r\n", tok9);
        read_request(head, RT, &r);
        assert_string_equal(upstream(&r), "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                          "X-Forwarded-Prefix: /proxy/9\r\n\r\n");
}

static void test_the_proxys_own_answers(void **state) {
        static const struct {
                const char *head;
                const char *runtime_token;
                unsigned status;
        } cases[] = {
                { "GET /proxy/8080/ HTTP/1.1\r\nHost: h\r\n\r\n", RT, 401 },
                { "GET /proxy/8080/ HTTP/1.1\r\nAuthorization: Bearer " RT "\r\n\r\n", RT, 401 }, /* the runtime's */
                { "GET /proxy/8080/ HTTP/1.1\r\nAuthorization: Bearer x\r\n\r\n", RT, 401 },
                { "GET /proxy/8080/ HTTP/1.1\r\n\r\n", NULL, 403 },
                { "GET /proxy/8080/ HTTP/1.1\r\n\r\n", "", 403 },
                { "GET /proxy/0/ HTTP/1.1\r\n\r\n", RT, 404 },
                { "GET /proxy/65536/ HTTP/1.1\r\n\r\n", RT, 404 },
                { "GET /proxy/808x/ HTTP/1.1\r\n\r\n", RT, 404 },
                { "GET /proxy/ HTTP/1.1\r\n\r\n", RT, 404 },
                { "GET /pro HTTP/1.1\r\n\r\n", RT, 404 },
                { "GET http://h/proxy/8080/ HTTP/1.1\r\n\r\n", RT, 404 },
                { "GET /proxy/8080/ HTTP/1.1\r\nHost: h\r\n", RT, 400 },
                { "GARBAGE\r\n\r\n", RT, 400 },
                { "GET /proxy/8080/ws Hagentix_token=x\r\n\r\n", RT, 400 },
                { "GET /proxy/8080/a\x01b HTTP/1.1\r\n\r\n", RT, 400 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(proxy_request_done) ProxyRequest r = {};
                read_request(cases[i].head, cases[i].runtime_token, &r);
                assert_false(r.forward);
                if (r.status != cases[i].status)
                        fail_msg("case %zu: %u, not %u", i, r.status, cases[i].status);
                assert_non_null(r.text);
                assert_non_null(strchr(r.text, '\n'));
        }
}

static void test_the_response_says_connection_close(void **state) {
        static const char *const cases[][2] = {
                { "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nhi",
                  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi" },
                { "HTTP/1.0 404 Not Found\r\n\r\n", "HTTP/1.0 404 Not Found\r\nConnection: close\r\n\r\n" },
                { "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
                  "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                assert_int_equal(buffer_append(&b, cases[i][0], strlen(cases[i][0])), 0);
                assert_int_equal(proxy_response_rewrite(&b), 1);
                assert_int_equal(buffer_append(&b, "", 1), 0);
                assert_string_equal((const char *) buffer_data(&b), cases[i][1]);
        }
        _cleanup_buffer_ Buffer partial = BUFFER_NULL, junk = BUFFER_NULL;
        static const char partial_head[] = "HTTP/1.1 200 OK\r\nA: b\r\n", junk_head[] = "SSH-2.0-x\r\n\r\n";
        assert_int_equal(buffer_append(&partial, partial_head, strlen(partial_head)), 0);
        assert_int_equal(proxy_response_rewrite(&partial), 0);
        assert_int_equal(buffer_append(&junk, junk_head, strlen(junk_head)), 0);
        assert_int_equal(proxy_response_rewrite(&junk), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bearer_forwards_the_path_below_the_port),
                cmocka_unit_test(test_the_proxys_cookie_is_dropped_and_the_others_kept),
                cmocka_unit_test(test_a_query_token_is_traded_for_a_cookie),
                cmocka_unit_test(test_an_upgrade_keeps_its_connection_headers),
                cmocka_unit_test(test_the_proxys_own_answers),
                cmocka_unit_test(test_the_response_says_connection_close),
        };

        assert_int_equal(proxy_token(RT, 8080, tok), 0);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
