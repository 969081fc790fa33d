/* SPDX-License-Identifier: MIT */
/* agentix_code_*(): code contexts (code::) with C arguments and C items. */

#include "envelope.h"
#include "error.h"
#include "value.h"

static int pack_env_kwarg(msgpack_packer *pk, const char *const *env) {
        if (mp_pack_cstr(pk, "env") < 0)
                return -ENOMEM;
        return value_pack_env(pk, env);
}

/* A call whose value is None, with [context] as its arguments. */
static int code_call_none(agentix_client *c, const char *function, const char *context, agentix_error *ret_error) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        msgpack_unpacked result;
        msgpack_packer pk;
        char callable[32];
        int r;

        if (!context)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "code::%s needs a context id", function);
        mp_packer_init_buffer(&pk, &args);
        if (msgpack_pack_array(&pk, 1) < 0 || mp_pack_cstr(&pk, context) < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        snprintf(callable, sizeof(callable), "code::%s", function);
        r = agentix_call(c, callable, &(agentix_args) { .args = buffer_data(&args), .args_size = args.len }, NULL,
                         &result, ret_error);
        if (r < 0)
                return r;
        msgpack_unpacked_destroy(&result);
        return 0;
}

AGENTIX_API int agentix_code_create_context(agentix_client *c, const agentix_code_context_options *o, char **ret_id,
                                            agentix_error *ret_error) {
        _cleanup_buffer_ Buffer kwargs = BUFFER_NULL;
        msgpack_unpacked result;
        msgpack_packer pk;
        int r = 0;

        if (!ret_id)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_code_create_context() needs ret_id");
        mp_packer_init_buffer(&pk, &kwargs);
        r |= msgpack_pack_map(&pk, o ? !!o->language + !!o->cwd + !!o->env : 0);
        if (o && o->language) {
                r |= mp_pack_cstr(&pk, "language");
                r |= mp_pack_cstr(&pk, o->language);
        }
        if (o && o->cwd) {
                r |= mp_pack_cstr(&pk, "cwd");
                r |= mp_pack_cstr(&pk, o->cwd);
        }
        if (o && o->env && r == 0)
                r = pack_env_kwarg(&pk, o->env);
        if (r)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        r = agentix_call(c, "code::create_context",
                         &(agentix_args) { .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len }, NULL, &result,
                         ret_error);
        if (r < 0)
                return r;
        if (result.data.type != MSGPACK_OBJECT_STR || value_dup_bytes(&result.data, ret_id, NULL) < 0) {
                msgpack_unpacked_destroy(&result);
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EPROTO, "code::create_context returned no context id");
        }
        msgpack_unpacked_destroy(&result);
        return 0;
}

AGENTIX_API int agentix_code_interrupt(agentix_client *c, const char *context, agentix_error *ret_error) {
        return code_call_none(c, "interrupt", context, ret_error);
}

AGENTIX_API int agentix_code_restart(agentix_client *c, const char *context, agentix_error *ret_error) {
        return code_call_none(c, "restart", context, ret_error);
}

AGENTIX_API int agentix_code_delete_context(agentix_client *c, const char *context, agentix_error *ret_error) {
        return code_call_none(c, "delete_context", context, ret_error);
}

/* ---- runs and their items ------------------------------------------------------------------ */

AGENTIX_API void agentix_code_item_done(agentix_code_item *item) {
        if (!item)
                return;
        free(item->text);
        free(item->name);
        free(item->traceback);
        for (size_t i = 0; i < item->n_data; i++) {
                free(item->data[i].mime);
                free(item->data[i].data);
        }
        free(item->data);
        *item = (agentix_code_item) {};
}

static bool str_is(const msgpack_object *o, const char *s) {
        size_t n = strlen(s);

        return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

static int parse_bundle(const msgpack_object *data, agentix_code_item *item) {
        if (!data || data->type != MSGPACK_OBJECT_MAP)
                return -EBADMSG;
        item->data = calloc(data->via.map.size ?: 1, sizeof(agentix_code_data));
        if (!item->data)
                return -ENOMEM;
        for (uint32_t i = 0; i < data->via.map.size; i++) {
                const msgpack_object_kv *kv = &data->via.map.ptr[i];
                agentix_code_data *d = &item->data[item->n_data];
                int r;

                if (kv->key.type != MSGPACK_OBJECT_STR)
                        return -EBADMSG;
                r = value_dup_bytes(&kv->key, &d->mime, NULL);
                if (r < 0)
                        return r;
                item->n_data++;
                d->value = kv->val;
                if (kv->val.type == MSGPACK_OBJECT_STR || kv->val.type == MSGPACK_OBJECT_BIN) {
                        r = value_dup_bytes(&kv->val, &d->data, &d->size);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int parse_item(const msgpack_object *v, agentix_code_item *item) {
        const msgpack_object *type = mp_map_get(v, "type");
        int64_t count;
        int r;

        if (v->type != MSGPACK_OBJECT_MAP)
                return -EBADMSG;
        if (str_is(type, "stdout") || str_is(type, "stderr")) {
                item->type = str_is(type, "stdout") ? AGENTIX_CODE_STDOUT : AGENTIX_CODE_STDERR;
                r = value_get_bytes(v, "text", &item->text, &item->text_size);
                if (r >= 0)
                        r = value_get_bool(v, "truncated", false, &item->truncated);
                return r;
        }
        if (str_is(type, "result")) {
                item->type = AGENTIX_CODE_RESULT;
                r = value_get_bool(v, "is_main_result", false, &item->is_main_result);
                if (r >= 0)
                        r = value_get_int(v, "execution_count", -1, &item->execution_count);
                if (r >= 0)
                        r = parse_bundle(mp_map_get(v, "data"), item);
                return r;
        }
        if (str_is(type, "error")) {
                item->type = AGENTIX_CODE_ERROR;
                r = value_get_bytes(v, "name", &item->name, NULL);
                if (r >= 0)
                        r = value_get_bytes(v, "value", &item->text, &item->text_size);
                if (r >= 0)
                        r = value_get_bytes(v, "traceback", &item->traceback, NULL);
                return r;
        }
        if (str_is(type, "execution_count")) {
                item->type = AGENTIX_CODE_EXECUTION_COUNT;
                r = value_get_int(v, "execution_count", -1, &count);
                item->execution_count = count;
                return r;
        }
        return -EBADMSG;
}

AGENTIX_API int agentix_code_item_parse(const msgpack_object *value, agentix_code_item *ret, agentix_error *ret_error) {
        agentix_code_item item = { .execution_count = -1 };
        int r;

        if (!value || !ret)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_code_item_parse() needs a value and an item");
        r = parse_item(value, &item);
        if (r < 0) {
                agentix_code_item_done(&item);
                return r == -ENOMEM ? error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory")
                                    : error_set(ret_error, AGENTIX_E_PROTOCOL, -EPROTO,
                                                "code::run sent an item that is not {type: stdout|stderr|result|error|"
                                                "execution_count, …}");
        }
        *ret = item;
        return 0;
}

AGENTIX_API const agentix_code_data *agentix_code_item_get(const agentix_code_item *item, const char *mime) {
        for (size_t i = 0; item && mime && i < item->n_data; i++)
                if (streq(item->data[i].mime, mime))
                        return &item->data[i];
        return NULL;
}

/* code::run's [code] and {context, language, env, timeout, max_output}. */
static int pack_run(const char *code, const agentix_code_run_options *o, Buffer *args, Buffer *kwargs) {
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, args);
        r |= msgpack_pack_array(&pk, 1);
        r |= mp_pack_cstr(&pk, code);
        mp_packer_init_buffer(&pk, kwargs);
        r |= msgpack_pack_map(&pk, o ? !!o->context + !!o->language + !!o->env + (o->timeout_sec > 0) +
                                               (o->max_output > 0)
                                     : 0);
        if (o && o->context) {
                r |= mp_pack_cstr(&pk, "context");
                r |= mp_pack_cstr(&pk, o->context);
        }
        if (o && o->language) {
                r |= mp_pack_cstr(&pk, "language");
                r |= mp_pack_cstr(&pk, o->language);
        }
        if (o && o->env && r == 0)
                r = pack_env_kwarg(&pk, o->env);
        if (o && o->timeout_sec > 0) {
                r |= mp_pack_cstr(&pk, "timeout");
                r |= msgpack_pack_double(&pk, o->timeout_sec);
        }
        if (o && o->max_output > 0) {
                r |= mp_pack_cstr(&pk, "max_output");
                r |= msgpack_pack_uint64(&pk, o->max_output);
        }
        return r ? -ENOMEM : 0;
}

AGENTIX_API int agentix_code_run_async(agentix_client *c, const char *code, const agentix_code_run_options *o,
                                       const agentix_request_handlers *h, void *userdata, agentix_request **ret,
                                       agentix_error *ret_error) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        int r;

        if (!code || !h)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_code_run_async() needs code and handlers");
        if (pack_run(code, o, &args, &kwargs) < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        r = agentix_call_async(c, "code::run",
                               &(agentix_args) { .args = buffer_data(&args), .args_size = args.len,
                                                 .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len },
                               &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, h, userdata, ret);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_CONNECTION, r, "cannot start code::run: %s", strerror(-r));
        return 0;
}

AGENTIX_API int agentix_code_run(agentix_client *c, const char *code, const agentix_code_run_options *o,
                                 agentix_code_item_handler h, void *userdata, agentix_error *ret_error) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        agentix_request *req = NULL;
        int r;

        if (!code)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_code_run() needs code");
        if (pack_run(code, o, &args, &kwargs) < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        r = agentix_call_start(c, "code::run",
                               &(agentix_args) { .args = buffer_data(&args), .args_size = args.len,
                                                 .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len },
                               &(agentix_call_options) { .shape = AGENTIX_CALL_STREAM }, &req);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_CONNECTION, r, "cannot start code::run: %s", strerror(-r));
        for (;;) {
                agentix_code_item item = {};
                msgpack_unpacked m;

                r = agentix_request_next(req, &m, 0, ret_error);
                if (r <= 0)
                        break;
                r = agentix_code_item_parse(&m.data, &item, ret_error);
                if (r >= 0 && h) {
                        r = h(&item, userdata);
                        if (r < 0)
                                (void) error_set(ret_error, AGENTIX_E_CANCELLED, r, "the item handler stopped the run: %s",
                                                 strerror(-r));
                }
                agentix_code_item_done(&item);
                msgpack_unpacked_destroy(&m);
                if (r < 0) {
                        (void) agentix_request_cancel(req);
                        break;
                }
        }
        agentix_request_unref(req);
        return r < 0 ? r : 0;
}
