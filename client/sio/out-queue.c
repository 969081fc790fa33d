/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "eio-transport.h"

int out_queue_push(OutQueue *q, bool binary, Buffer *data) {
        OutMessage *m;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->binary = binary;
        m->data = *data;
        *data = BUFFER_NULL;

        if (q->tail)
                q->tail->next = m;
        else
                q->head = m;
        q->tail = m;
        q->bytes += m->data.len;
        return 0;
}

OutMessage *out_queue_pop(OutQueue *q) {
        OutMessage *m = q->head;

        if (!m)
                return NULL;
        q->head = m->next;
        if (!q->head)
                q->tail = NULL;
        q->bytes -= m->data.len;
        m->next = NULL;
        return m;
}

void out_message_free(OutMessage *m) {
        if (!m)
                return;
        buffer_done(&m->data);
        free(m);
}

void out_queue_clear(OutQueue *q) {
        OutMessage *m;

        while ((m = out_queue_pop(q)))
                out_message_free(m);
        q->inflight = 0;
}
