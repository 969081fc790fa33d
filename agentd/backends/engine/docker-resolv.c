/* SPDX-License-Identifier: MIT */
/* The resolv.conf of sandboxes on gVisor's own network stack (agentix-runsc(8)): Docker gives a
 * container on a network of its own the embedded DNS at 127.0.0.11, which a DNAT rule in the
 * container's namespace forwards; gVisor's stack sends its packets past that namespace's rules,
 * so such a sandbox asks the host's resolvers itself (agentix-firewall lets a sandbox reach them
 * on port 53, as Docker's DNS does from its namespace). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buffer.h"
#include "docker-backend.h"
#include "log.h"
#include "macro.h"

#define HOST_RESOLV_CONF "/etc/resolv.conf"
#define NAMESERVERS_MAX 3 /* what the resolver reads */

static bool loopback(const char *address) {
        return startswith(address, "127.") || streq(address, "::1");
}

/* The host's resolv.conf without its loopback nameservers (a local stub the sandbox cannot
 * reach); -ENOENT when none is left. */
static int sandbox_resolv_conf(Buffer *out) {
        _cleanup_fclose_ FILE *f = fopen(HOST_RESOLV_CONF, "re");
        char line[512], address[256];
        unsigned n = 0;

        if (!f)
                return -errno;
        if (buffer_printf(out, "# agentd: the host's resolvers (a sandbox on gVisor's network stack)\n") < 0)
                return -ENOMEM;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "nameserver %255s", address) == 1) {
                        if (loopback(address) || n >= NAMESERVERS_MAX)
                                continue;
                        n++;
                } else if (!startswith(line, "search ") && !startswith(line, "options "))
                        continue;
                if (buffer_printf(out, "%s%s", line, strchr(line, '\n') ? "" : "\n") < 0)
                        return -ENOMEM;
        }
        return n > 0 ? 0 : -ENOENT;
}

const char *docker_resolv_conf_path(DockerBackend *b) {
        _cleanup_(buffer_done) Buffer text = BUFFER_NULL;
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        const char *dir = getenv("STATE_DIRECTORY");
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (b->resolv_conf)
                return b->resolv_conf;
        r = sandbox_resolv_conf(&text);
        if (r < 0) {
                if (!b->resolv_conf_warned)
                        log_warning("Sandboxes on gVisor's network stack keep Docker's resolv.conf, whose DNS they "
                                    "cannot reach: %s has no nameserver they could (%s).", HOST_RESOLV_CONF,
                                    strerror(-r));
                b->resolv_conf_warned = true;
                return NULL;
        }
        /* STATE_DIRECTORY may list several, separated by ':'; agentd.service names one. */
        if (dir && dir[0] && dir[0] != ':')
                r = asprintf(&path, "%.*s/sandbox-resolv.conf", (int) strcspn(dir, ":"), dir);
        else {
                (void) mkdir("/var/lib/agentix", 0700);
                r = asprintf(&path, "/var/lib/agentix/sandbox-resolv.conf");
        }
        if (r < 0 || asprintf(&tmp, "%s.XXXXXX", path) < 0)
                return NULL;
        fd = mkostemp(tmp, O_CLOEXEC);
        /* Read by every account in the sandbox: 0644 whatever the umask (agentd.service's is 0077). */
        if (fd < 0 || fchmod(fd, 0644) < 0 || write(fd, buffer_data(&text), text.len) != (ssize_t) text.len ||
            rename(tmp, path) < 0) {
                log_warning("Cannot write %s for sandboxes on gVisor's network stack: %m", path);
                if (fd >= 0)
                        (void) unlink(tmp);
                return NULL;
        }
        b->resolv_conf = TAKE_PTR(path);
        return b->resolv_conf;
}
