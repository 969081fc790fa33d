// SPDX-License-Identifier: MIT
// agentd on the system bus, through cockpit.js's D-Bus client, as the logged-in user: the bus
// policy and agentd's per-user checks decide what the page may do, never the page. With
// Cockpit's administrative access turned on the calls go as root (superuser: "try").
/* global cockpit */

export const NAME = 'org.agentix.Agentd1';
export const MANAGER_PATH = '/org/agentix/Agentd1';
export const MANAGER = 'org.agentix.Agentd1.Manager';
export const SANDBOX = 'org.agentix.Agentd1.Sandbox';
const PROPERTIES = 'org.freedesktop.DBus.Properties';
const SANDBOX_PREFIX = MANAGER_PATH + '/sandbox/';
const LONG_CALL_MS = 15 * 60 * 1000;

// cockpit.dbus gives properties as {t, v} variants; the page wants the values.
function unwrap(dict) {
    const out = {};
    for (const [k, variant] of Object.entries(dict || {}))
        out[k] = variant && typeof variant === 'object' && 't' in variant ? variant.v : variant;
    return out;
}

// An error as agentd wrote it: its message, and its D-Bus name for who wants to know.
export function describeError(e) {
    if (!e)
        return 'failed';
    if (e.message)
        return e.message;
    return cockpit.message(e);
}

export class Agentd {
    constructor() {
        this.client = cockpit.dbus(NAME, { bus: 'system', superuser: 'try' });
    }

    // Creates, snapshots and deletes wait on the container engine: no D-Bus default timeout.
    call(path, iface, method, args, signature) {
        const options = { timeout: LONG_CALL_MS };
        if (signature)
            options.type = signature;
        return this.client.call(path, iface, method, args || [], options);
    }

    manager(method, args, signature) {
        return this.call(MANAGER_PATH, MANAGER, method, args, signature);
    }

    sandbox(path, method, args, signature) {
        return this.call(path, SANDBOX, method, args, signature);
    }

    async managerProperties() {
        const [props] = await this.call(MANAGER_PATH, PROPERTIES, 'GetAll', [MANAGER]);
        return unwrap(props);
    }

    async sandboxProperties(path) {
        const [props] = await this.call(path, PROPERTIES, 'GetAll', [SANDBOX]);
        return unwrap(props);
    }

    // Every sandbox the caller may see, as [id, image, state, path].
    async listSandboxes() {
        const [list] = await this.manager('ListSandboxes');
        return list;
    }

    // config: key -> {t: signature, v: value}, CreateSandbox's a{sv}.
    async create(config) {
        const [path, id] = await this.manager('CreateSandbox', [config], 'a{sv}');
        return { path, id };
    }

    async runtimeAccess(id) {
        const [url, token] = await this.manager('GetRuntimeAccess', [id], 's');
        return { url, token };
    }

    async portUrl(id, port) {
        const [url, token] = await this.manager('GetPortUrl', [id, port], 'sq');
        return { url, token };
    }

    async pools() {
        const [pools] = await this.manager('ListPools');
        return pools.map(([name, ready, size]) => ({ name, ready, size }));
    }

    async snapshots() {
        const [list] = await this.manager('ListSnapshots');
        return list.map(([image, sandbox, owner, created, size]) => ({ image, sandbox, owner, created, size }));
    }

    deleteSnapshot(image) {
        return this.manager('DeleteSnapshot', [image], 's');
    }

    async usage() {
        const [usage] = await this.manager('GetUsage');
        return unwrap(usage);
    }

    async stats(path) {
        const [stats] = await this.sandbox(path, 'GetStats');
        return unwrap(stats);
    }

    async logs(path, lines) {
        const [text] = await this.sandbox(path, 'Logs', [lines], 't');
        return text;
    }

    async snapshot(path, tag) {
        const options = tag ? { tag: { t: 's', v: tag } } : {};
        const [image] = await this.sandbox(path, 'Snapshot', [options], 'a{sv}');
        return image;
    }

    // What the page follows instead of polling the list: sandboxes made and removed, their
    // properties as they change, and agentd itself coming and going (re-read everything).
    watch({ onNew, onRemoved, onChanged, onOwner }) {
        const subscriptions = [
            this.client.subscribe({ path: MANAGER_PATH, interface: MANAGER, member: 'SandboxNew' },
                                  (path, iface, signal, [id, object]) => onNew(id, object)),
            this.client.subscribe({ path: MANAGER_PATH, interface: MANAGER, member: 'SandboxRemoved' },
                                  (path, iface, signal, [id, object]) => onRemoved(id, object)),
            this.client.subscribe({ interface: PROPERTIES, member: 'PropertiesChanged' },
                                  (path, iface, signal, [changedIface, changed]) => {
                                      if (path.startsWith(SANDBOX_PREFIX) && changedIface === SANDBOX)
                                          onChanged(path, unwrap(changed));
                                      else if (path === MANAGER_PATH && changedIface === MANAGER)
                                          onChanged(path, unwrap(changed));
                                  }),
        ];
        const owner = (event, name) => onOwner(name);
        this.client.addEventListener('owner', owner);
        return () => {
            subscriptions.forEach((s) => s.remove());
            this.client.removeEventListener('owner', owner);
        };
    }
}
