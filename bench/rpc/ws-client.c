/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <libwebsockets.h>
#include <openssl/evp.h>

#include "log.h"
#include "ws-client.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xa
#define RX_CHUNK (256u * 1024u)
#define HANDSHAKE_MAX 8192

static uint64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static uint32_t next_mask(WsClient *ws) {
        /* xorshift64: masking keys only need to be unpredictable to intermediaries, not secret. */
        uint64_t x = ws->mask_state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ws->mask_state = x;
        return (uint32_t) (x >> 16);
}

static int connect_tcp(const char *host, const char *port, int timeout_ms) {
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        struct addrinfo *res = NULL;
        int fd = -EBADF, r;

        r = getaddrinfo(host, port, &hints, &res);
        if (r != 0)
                return log_error_errno(EADDRNOTAVAIL, "Failed to resolve %s:%s: %s", host, port, gai_strerror(r));

        r = -ECONNREFUSED;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                struct pollfd p;

                fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        r = negative_errno();
                        continue;
                }
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        r = negative_errno();
                        fd = safe_close(fd);
                        continue;
                }
                p = (struct pollfd) { .fd = fd, .events = POLLOUT };
                if (poll(&p, 1, timeout_ms) <= 0) {
                        r = -ETIMEDOUT;
                        fd = safe_close(fd);
                        continue;
                }
                {
                        int err = 0;
                        socklen_t l = sizeof(err);
                        (void) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
                        if (err != 0) {
                                r = -err;
                                fd = safe_close(fd);
                                continue;
                        }
                }
                r = 0;
                break;
        }
        freeaddrinfo(res);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to %s:%s: %m", host, port);
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
        return fd;
}

static int expected_accept(const char *key, char *out, size_t size) {
        char in[128];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        int n = snprintf(in, sizeof(in), "%s%s", key, WS_GUID);

        if (n < 0 || (size_t) n >= sizeof(in))
                return -EINVAL;
        if (!EVP_Digest(in, (size_t) n, md, &md_len, EVP_sha1(), NULL))
                return -EIO;
        if (lws_b64_encode_string((const char *) md, (int) md_len, out, (int) size) < 0)
                return -EINVAL;
        return 0;
}

/* Case-insensitive search for a header line; returns its trimmed value in `out`. */
static bool header_value(const char *headers, const char *name, char *out, size_t size) {
        size_t n = strlen(name);

        for (const char *l = strstr(headers, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
                const char *line = l + 2, *end;
                size_t k;

                if (strncasecmp(line, name, n) != 0 || line[n] != ':')
                        continue;
                line += n + 1;
                while (*line == ' ' || *line == '\t')
                        line++;
                end = strstr(line, "\r\n");
                k = end ? (size_t) (end - line) : strlen(line);
                while (k > 0 && (line[k - 1] == ' ' || line[k - 1] == '\t'))
                        k--;
                if (k >= size)
                        return false;
                memcpy(out, line, k);
                out[k] = 0;
                return true;
        }
        return false;
}

int ws_client_connect(WsClient *ws, const char *host, const char *port, const char *path, int timeout_ms) {
        char key[32], accept_want[64], accept_got[64], req[1024], resp[HANDSHAKE_MAX + 1];
        uint8_t nonce[16];
        size_t got = 0, sent = 0;
        uint64_t deadline = now_ms() + (uint64_t) timeout_ms;
        const char *eoh = NULL;
        int fd, n, r;

        *ws = (WsClient) { .fd = -EBADF, .on_message = ws->on_message, .userdata = ws->userdata,
                           .max_message = ws->max_message ?: 512u * 1024u * 1024u };

        if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce) ||
            getrandom(&ws->mask_state, sizeof(ws->mask_state), 0) != sizeof(ws->mask_state))
                return -EIO;
        ws->mask_state |= 1;
        if (lws_b64_encode_string((const char *) nonce, sizeof(nonce), key, sizeof(key)) < 0)
                return -EINVAL;
        r = expected_accept(key, accept_want, sizeof(accept_want));
        if (r < 0)
                return r;

        fd = connect_tcp(host, port, timeout_ms);
        if (fd < 0)
                return fd;
        ws->fd = fd;

        n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\n"
                     "Host: %s:%s\r\n"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n"
                     "\r\n",
                     path, host, port, key);
        if (n < 0 || (size_t) n >= sizeof(req))
                return -EINVAL;

        while (sent < (size_t) n || !eoh) {
                struct pollfd p = { .fd = fd, .events = sent < (size_t) n ? POLLOUT : POLLIN };
                uint64_t now = now_ms();
                ssize_t k;

                if (now >= deadline)
                        return log_error_errno(ETIMEDOUT, "WebSocket handshake with %s:%s timed out.", host, port);
                if (poll(&p, 1, (int) (deadline - now)) < 0 && errno != EINTR)
                        return negative_errno();
                if (sent < (size_t) n) {
                        k = send(fd, req + sent, (size_t) n - sent, MSG_NOSIGNAL);
                        if (k < 0 && errno != EAGAIN && errno != EINTR)
                                return log_error_errno(errno, "Failed to send the upgrade request: %m");
                        if (k > 0)
                                sent += (size_t) k;
                        continue;
                }
                k = recv(fd, resp + got, HANDSHAKE_MAX - got, 0);
                if (k == 0)
                        return log_error_errno(ECONNRESET, "The server closed the connection during the handshake.");
                if (k < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                continue;
                        return log_error_errno(errno, "Failed to read the upgrade response: %m");
                }
                got += (size_t) k;
                resp[got] = 0;
                eoh = strstr(resp, "\r\n\r\n");
                if (!eoh && got >= HANDSHAKE_MAX)
                        return log_error_errno(EBADMSG, "Upgrade response headers too long.");
        }

        if (strncmp(resp, "HTTP/1.1 101", 12) != 0)
                return log_error_errno(EPROTO, "The server refused the WebSocket upgrade: %.*s", (int) strcspn(resp, "\r\n"),
                                       resp);
        {
                /* Terminate the header block for the header search; the bytes after it are frames. */
                size_t head = (size_t) (eoh - resp) + 4;
                char saved = resp[head - 2];

                resp[head - 2] = 0;
                if (!header_value(resp, "Sec-WebSocket-Accept", accept_got, sizeof(accept_got)) ||
                    !streq(accept_got, accept_want))
                        return log_error_errno(EPROTO, "The server's Sec-WebSocket-Accept is missing or wrong.");
                resp[head - 2] = saved;
                if (got > head) {
                        r = buffer_append(&ws->rx, resp + head, got - head);
                        if (r < 0)
                                return r;
                        ws->rx_unparsed = true;
                }
        }
        return 0;
}

/* Copy `src` into `dst` XOR the 4-byte key, a word at a time. */
static void mask_copy(uint8_t *dst, const uint8_t *src, size_t n, uint32_t key) {
        uint8_t k[4];
        uint64_t k8;
        size_t i = 0;

        memcpy(k, &key, 4);
        memcpy(&k8, k, 4);
        memcpy((uint8_t *) &k8 + 4, k, 4);
        for (; i + 8 <= n; i += 8) {
                uint64_t v;
                memcpy(&v, src + i, 8);
                v ^= k8;
                memcpy(dst + i, &v, 8);
        }
        for (; i < n; i++)
                dst[i] = src[i] ^ k[i & 3];
}

static int queue_frame(WsClient *ws, uint8_t opcode, const void *data, size_t size) {
        uint8_t hdr[14];
        size_t h = 0;
        uint32_t key = next_mask(ws);
        int r;

        hdr[h++] = 0x80 | opcode;
        if (size < 126)
                hdr[h++] = 0x80 | (uint8_t) size;
        else if (size <= 0xffff) {
                hdr[h++] = 0x80 | 126;
                hdr[h++] = (uint8_t) (size >> 8);
                hdr[h++] = (uint8_t) size;
        } else {
                hdr[h++] = 0x80 | 127;
                for (int i = 7; i >= 0; i--)
                        hdr[h++] = (uint8_t) ((uint64_t) size >> (i * 8));
        }
        memcpy(hdr + h, &key, 4);
        h += 4;

        r = buffer_reserve(&ws->tx, h + size);
        if (r < 0)
                return r;
        memcpy(buffer_data(&ws->tx) + ws->tx.len, hdr, h);
        mask_copy(buffer_data(&ws->tx) + ws->tx.len + h, data, size, key);
        ws->tx.len += h + size;
        return 0;
}

int ws_client_queue(WsClient *ws, bool binary, const void *data, size_t size) {
        if (ws->closed)
                return -ECONNRESET;
        return queue_frame(ws, binary ? WS_OP_BINARY : WS_OP_TEXT, data, size);
}

int ws_client_flush(WsClient *ws) {
        while (ws->tx_off < ws->tx.len) {
                ssize_t k = send(ws->fd, buffer_data(&ws->tx) + ws->tx_off, ws->tx.len - ws->tx_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return negative_errno();
                }
                ws->tx_off += (size_t) k;
                ws->bytes_out += (size_t) k;
        }
        ws->tx_off = 0;
        buffer_clear(&ws->tx);
        return 0;
}

static int deliver(WsClient *ws, const uint8_t *data, size_t size, bool binary) {
        return ws->on_message ? ws->on_message(ws, data, size, binary, ws->userdata) : 0;
}

/* Parse every complete frame in rx. Returns messages delivered or a negative errno. */
static int parse_frames(WsClient *ws) {
        int delivered = 0, r;

        for (;;) {
                const uint8_t *p = buffer_data(&ws->rx) + ws->rx_off;
                size_t avail = ws->rx.len - ws->rx_off, h = 2;
                uint64_t len;
                uint8_t op;
                bool fin;

                if (avail < 2)
                        break;
                fin = p[0] & 0x80;
                op = p[0] & 0x0f;
                if (p[0] & 0x70)
                        return log_error_errno(EPROTO, "WebSocket frame with reserved bits set (no extension was negotiated).");
                if (p[1] & 0x80)
                        return log_error_errno(EPROTO, "The server sent a masked frame (RFC 6455 5.1 forbids it).");
                len = p[1] & 0x7f;
                if (len == 126) {
                        if (avail < 4)
                                break;
                        len = (uint64_t) p[2] << 8 | p[3];
                        h = 4;
                } else if (len == 127) {
                        if (avail < 10)
                                break;
                        len = 0;
                        for (int i = 0; i < 8; i++)
                                len = len << 8 | p[2 + i];
                        h = 10;
                }
                if (len > ws->max_message)
                        return log_error_errno(EMSGSIZE, "WebSocket frame of %" PRIu64 " bytes exceeds the limit.", len);
                if (avail < h + len) {
                        /* Make room for the whole frame so the next reads complete it. */
                        r = buffer_reserve(&ws->rx, h + (size_t) len - avail);
                        if (r < 0)
                                return r;
                        break;
                }

                const uint8_t *payload = p + h;
                ws->rx_off += h + (size_t) len;

                switch (op) {
                case WS_OP_TEXT:
                case WS_OP_BINARY:
                        if (ws->in_fragmented)
                                return log_error_errno(EPROTO, "New data frame inside a fragmented message.");
                        if (fin) {
                                r = deliver(ws, payload, (size_t) len, op == WS_OP_BINARY);
                                if (r < 0)
                                        return r;
                                delivered++;
                        } else {
                                ws->in_fragmented = true;
                                ws->msg_binary = op == WS_OP_BINARY;
                                buffer_clear(&ws->msg);
                                r = buffer_append(&ws->msg, payload, (size_t) len);
                                if (r < 0)
                                        return r;
                        }
                        break;
                case WS_OP_CONT:
                        if (!ws->in_fragmented)
                                return log_error_errno(EPROTO, "Continuation frame outside a fragmented message.");
                        if (ws->msg.len + len > ws->max_message)
                                return log_error_errno(EMSGSIZE, "Fragmented WebSocket message exceeds the limit.");
                        r = buffer_append(&ws->msg, payload, (size_t) len);
                        if (r < 0)
                                return r;
                        if (fin) {
                                ws->in_fragmented = false;
                                r = deliver(ws, buffer_data(&ws->msg), ws->msg.len, ws->msg_binary);
                                buffer_clear(&ws->msg);
                                if (r < 0)
                                        return r;
                                delivered++;
                        }
                        break;
                case WS_OP_PING:
                        if (!fin || len > 125)
                                return log_error_errno(EPROTO, "Malformed ping frame.");
                        r = queue_frame(ws, WS_OP_PONG, payload, (size_t) len);
                        if (r < 0)
                                return r;
                        break;
                case WS_OP_PONG:
                        break;
                case WS_OP_CLOSE:
                        /* Echo the status code, as RFC 6455 5.5.1 asks, then stop. */
                        (void) queue_frame(ws, WS_OP_CLOSE, payload, MIN((size_t) len, (size_t) 2));
                        (void) ws_client_flush(ws);
                        ws->closed = true;
                        return -ECONNRESET;
                default:
                        return log_error_errno(EPROTO, "Unknown WebSocket opcode 0x%x.", op);
                }
        }

        /* Compact: drop parsed bytes once the buffer is empty or mostly consumed. */
        if (ws->rx_off == ws->rx.len) {
                buffer_clear(&ws->rx);
                ws->rx_off = 0;
        } else if (ws->rx_off > 0 && ws->rx_off >= ws->rx.len / 2) {
                buffer_consume(&ws->rx, ws->rx_off);
                ws->rx_off = 0;
        }
        return delivered;
}

/* One recv() per pump: small messages arrive whole in it, large ones are parsed as they come
 * instead of piling up unparsed. */
static int read_available(WsClient *ws) {
        for (;;) {
                size_t space;
                ssize_t k;
                int r;

                r = buffer_reserve(&ws->rx, RX_CHUNK);
                if (r < 0)
                        return r;
                space = ws->rx.cap - ws->rx.len - 1;
                k = recv(ws->fd, buffer_data(&ws->rx) + ws->rx.len, space, MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return negative_errno();
                }
                if (k == 0) {
                        ws->closed = true;
                        return -ECONNRESET;
                }
                ws->rx.len += (size_t) k;
                ws->bytes_in += (size_t) k;
                return 0;
        }
}

int ws_client_pump(WsClient *ws, int timeout_ms) {
        struct pollfd p = { .fd = ws->fd, .events = POLLIN };
        int r, delivered;

        if (ws->closed)
                return -ECONNRESET;
        if (ws->rx_unparsed) {
                /* Frames that came in with the handshake response. */
                ws->rx_unparsed = false;
                delivered = parse_frames(ws);
                if (delivered != 0)
                        return delivered < 0 ? delivered : (ws_client_flush(ws) ?: delivered);
        }
        if (ws->tx.len > ws->tx_off) {
                r = ws_client_flush(ws);
                if (r < 0)
                        return r;
        }
        if (ws->tx.len > ws->tx_off)
                p.events |= POLLOUT;

        r = poll(&p, 1, timeout_ms);
        if (r < 0)
                return errno == EINTR ? 0 : negative_errno();
        if (r == 0)
                return 0;
        if (p.revents & POLLOUT) {
                r = ws_client_flush(ws);
                if (r < 0)
                        return r;
        }
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
                return 0;

        r = read_available(ws);
        delivered = parse_frames(ws);
        if (delivered < 0)
                return delivered;
        if (r < 0 && delivered == 0)
                return r;
        /* Answers queued by the callbacks (next calls, acks, pongs) go out now. */
        r = ws_client_flush(ws);
        if (r < 0)
                return r;
        return delivered;
}

int ws_client_close(WsClient *ws, int timeout_ms) {
        static const uint8_t normal[2] = { 0x03, 0xe8 }; /* 1000: normal closure */
        int r;

        if (ws->fd < 0 || ws->closed)
                return 0;
        r = queue_frame(ws, WS_OP_CLOSE, normal, sizeof(normal));
        if (r < 0)
                return r;
        /* Wait for the server's close frame (or EOF), so it sees a clean end, not a reset. */
        for (int waited = 0; !ws->closed && waited < timeout_ms; waited += 50) {
                r = ws_client_pump(ws, 50);
                if (r == -ECONNRESET)
                        return 0;
                if (r < 0)
                        return r;
        }
        (void) shutdown(ws->fd, SHUT_WR);
        return 0;
}

void ws_client_done(WsClient *ws) {
        ws->fd = safe_close(ws->fd);
        buffer_done(&ws->rx);
        buffer_done(&ws->msg);
        buffer_done(&ws->tx);
}
