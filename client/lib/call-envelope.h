/* SPDX-License-Identifier: MIT */
#pragma once

/* The client's /rpc envelopes (one msgpack map each): call, call:in, resume. The one-field
 * ones (call:end_in, cancel, ack) are rpc_envelope_call_id() from the shared envelope.h. */

#include <stdint.h>

#include "agentix.h"
#include "buffer.h"

#define EV_CALL "call"
#define EV_CALL_IN "call:in"
#define EV_CALL_END_IN "call:end_in"
#define EV_CANCEL "cancel"
#define EV_RESUME "resume"
#define EV_ACK "ack"
#define EV_RESULT "call:result"
#define EV_ITEM "call:item"
#define EV_END "call:end"
#define EV_ERROR "call:error"
#define EV_IN_ACK "call:in_ack"

/* Random bytes for call_ids, fetched 256 at a time: a getrandom() per 16 calls, not per
 * call. One per client (a client is used from one thread; a forked child that makes its own
 * client starts from an empty pool). */
typedef struct CallIdPool {
        uint8_t bytes[256];
        size_t left;
} CallIdPool;

/* A fresh call_id: 32 lower-case hex digits of getrandom() bytes (buf: at least 33 bytes),
 * taken from pool (NULL: a getrandom() for this one). */
int call_id_new(CallIdPool *pool, char buf[static 33]);

const char *call_shape_name(agentix_call_shape shape);

/* {call_id, callable, shape, args, kwargs[, deadline_ms][, in_ack: true]}. args/kwargs are the
 * caller's packed bytes (already checked to be an array / a map) copied as they are; absent:
 * [] / {}. Bidi calls ask for call:in_ack (flow control of their inbox). */
int call_envelope_pack(Buffer *out, const char *id, const char *callable, agentix_call_shape shape,
                       const agentix_args *a, uint64_t deadline_ms);

/* {call_id, item[, urgent: true], seq} with the caller's packed item. seq is packed last, always
 * as 9 bytes (uint64), so that call_envelope_set_seq() can fill it in when the item is sent. */
int call_envelope_pack_item(Buffer *out, const char *id, const void *item, size_t item_size, bool urgent);
void call_envelope_set_seq(uint8_t *envelope, size_t size, uint64_t seq);

/* {call_ids: [ids…]}. */
int call_envelope_pack_resume(Buffer *out, const char *const *ids, size_t n_ids);
