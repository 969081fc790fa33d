/* SPDX-License-Identifier: MIT */
#pragma once

/* envd's Filesystem/ListDir (e2b-envd-listdir.c), routed by e2b-envd-filesystem.c. */

#include "http-server.h"
#include "rpc.h"

/* Take the request on c (its route checked the token and the method) and answer it. */
void envd_listdir_take(Rpc *rpc, HttpConn *c);
